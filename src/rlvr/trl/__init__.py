"""TRL's GRPO interface over rlvr: `from rlvr.trl import GRPOConfig, GRPOTrainer` in place of `from trl import
...`. TRL's argument names and defaults; what rlvr does not support is refused in one line (docs/from_trl.md)."""

from rlvr.trl.trainer import GRPOConfig, GRPOTrainer

__all__ = ["GRPOConfig", "GRPOTrainer"]
