"""The run section: the keys every training command's config has about the run itself, declared and checked once.

`rlvr train` (TrainConfig), `rlvr sft` (SFTConfig) and `rlvr rm` (RewardModelConfig) extend RunSection, so the
keys stay where they always were in a config file (top level: `output_dir: runs/x`, `distributed.strategy`);
a command changes a default or its words by declaring the field again (its own `max_steps`, `output_dir`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlvr.config.sections import DistributedConfig, LoggingConfig, check


@dataclass
class RunSection:
    """Where a run writes, its seed and threads, how long it runs, when it saves and evaluates, the checkpoints it
    keeps, its ranks and its trackers (what the run core, rlvr.run, reads)."""

    output_dir: str = "runs/latest"
    """Run directory: config.yaml, metrics.jsonl, tensorboard/, checkpoints/, summary.json."""
    seed: int = 0
    """Seeds data order, sampling and initialisation."""
    threads: int = 0
    """CPU threads for torch (0 = all cores)."""
    max_steps: int = 0
    """Optimizer steps; 0 = as many as `epochs` passes take."""
    save_every: int = 0
    """Checkpoint every N steps (0 = only at the end)."""
    eval_every: int = 0
    """Also evaluate the held-out data every N steps (0 = only before and after)."""
    keep_checkpoints: int = 2
    """Keep the newest N checkpoints on disk, deleting older ones (0 = keep every one)."""
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    """Several ranks under torchrun (or `--nproc N`): the strategy, the collectives' time limit."""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """Trackers (logging.report_to: tensorboard, wandb, trackio, mlflow)."""

    def validate_run(self) -> None:
        """The run section's checks, the same for every command (a command's own come after)."""
        self.distributed.validate()
        self.logging.validate()
        check([
            (self.max_steps >= 0, "max_steps must be >= 0"),
            (self.save_every >= 0, "save_every must be >= 0 (0 = only at the end)"),
            (self.eval_every >= 0, "eval_every must be >= 0 (0 = only before and after)"),
            (self.keep_checkpoints >= 0, "keep_checkpoints must be >= 0 (0 = keep every checkpoint)"),
            (self.threads >= 0, "threads must be >= 0 (0 = all cores)"),
        ])
