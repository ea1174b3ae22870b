"""`reward_model`: a trained reward model as a GRPO reward, in TRL's signature.

    rewards:
      - name: reward_model
        params: {path: runs/reward_model}

The reward is the normalised score (r − mean) / (std + ε), with the mean and std of the model's
scores on its training completions, so it sits on a scale comparable to a 0/1 verifier's and a
weight means the same for it as for the others. Each model is loaded once per (path, device,
batch size) and kept for the life of the process.

torch and transformers are imported on the first call, so listing the built-in rewards stays cheap.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlvr.errors import UserError

if TYPE_CHECKING:
    from rlvr.reward_models.scoring import RewardModelScorer

_SCORERS: dict[tuple[str, str | None, int], "RewardModelScorer"] = {}
_LOCK = threading.Lock()  # built-in rewards may be called from a thread pool (rlvr.rewards.combine)


def reward_model(
    prompts: list[Any],
    completions: list[Any],
    path: str | None = None,
    batch_size: int = 16,
    device: str | None = None,
    **kwargs: Any,
) -> list[float]:
    """Normalised reward-model scores of the completions (text or chat messages) for their prompts.

    `path` is the run directory of `rlvr rm`, one of its checkpoints, or their model/ folder;
    `device` defaults to the GPU when there is one.
    """
    if path is None:
        raise UserError("reward 'reward_model' needs the model: params: {path: RUN_DIR} (a run directory of `rlvr rm`)")
    if prompts is None or len(prompts) != len(completions):
        raise UserError("reward 'reward_model' needs the prompts the completions answer (call it with prompts=..., as TRL does)")
    return cached_scorer(path, device=device, batch_size=batch_size).normalised(prompts, completions)


def cached_scorer(path: str | Path, *, device: str | None = None, batch_size: int = 16) -> "RewardModelScorer":
    """The scorer for `path`, loaded on first use (one per resolved model directory, device and batch size)."""
    from rlvr.reward_models.scoring import RewardModelScorer
    from rlvr.reward_models.stats import find_reward_model

    key = (str(find_reward_model(path).resolve()), device, batch_size)
    with _LOCK:
        if key not in _SCORERS:
            _SCORERS[key] = RewardModelScorer.from_path(key[0], batch_size=batch_size, device=device)
        return _SCORERS[key]
