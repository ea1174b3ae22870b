"""The layout of a run directory, named in one place.

    RUN_DIR/config.yaml            the effective config of the latest session
    RUN_DIR/metrics.jsonl          one JSON object per step (and tensorboard/, its mirror)
    RUN_DIR/samples.jsonl          groups of completions recorded every `sample_every` steps (GRPO)
    RUN_DIR/summary.json           written when the run finishes
    RUN_DIR/heldout.json           with it (GRPO, PPO): each held-out problem's verdicts before and after
    RUN_DIR/checkpoints/step-000010/{model/, trainer.pt, config.yaml, ...}
    RUN_DIR/best/                  with keep_best: the checkpoint of the best validation accuracy (rlvr.run.best)

A checkpoint directory is renamed into place only once complete (rlvr.run.checkpoint), so a
directory named step-N was whole when written; `latest_checkpoint` ignores anything else. A disk or a
copy can still break one later: rlvr.intact checks, and a resumed run sets a broken one aside as
checkpoints/broken-step-N, where it stays.
"""

from __future__ import annotations

from pathlib import Path

CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"
HELDOUT = "heldout.json"
INPUTS = "inputs"  # what a run from Python was given in memory (rows, a model object), kept in the run
TENSORBOARD = "tensorboard"
CHECKPOINTS = "checkpoints"
BEST = "best"
STEP_PREFIX = "step-"
BROKEN_PREFIX = "broken-"  # a broken checkpoint set aside on resume: checkpoints/broken-step-000010
MODEL = "model"  # inside a checkpoint: save_pretrained weights and tokenizer, loadable by transformers
REFERENCE = "reference"  # inside a GRPO checkpoint, once the reference has been refreshed from the policy
TRAINER_STATE = "trainer.pt"  # inside a checkpoint: optimizer, scheduler, data order, RNG, step
MANIFEST = "manifest.json"  # inside a checkpoint, written last: every file's size, and the hash of each small one
SHARDS = "dcp"  # inside a checkpoint of several ranks: model and optimizer in parts (torch.distributed.checkpoint)
RANK_RNG = "rng"  # inside a checkpoint of several ranks: rank{r}.pt, each rank's RNG state


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / CHECKPOINTS


def step_dir(run_dir: Path, step: int) -> Path:
    """checkpoints/step-000010 for step 10."""
    return checkpoint_dir(run_dir) / f"{STEP_PREFIX}{step:06d}"


def checkpoints(run_dir: Path) -> list[Path]:
    """The complete checkpoints of a run, oldest first."""
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return []
    done = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(STEP_PREFIX) and _step(p).isdigit()]
    return sorted(done, key=step_of)


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step, or None."""
    done = checkpoints(run_dir)
    return done[-1] if done else None


def step_of(checkpoint: Path) -> int:
    """The step a checkpoint was saved at: 10 for checkpoints/step-000010."""
    return int(_step(checkpoint))


def _step(checkpoint: Path) -> str:
    return checkpoint.name[len(STEP_PREFIX):]
