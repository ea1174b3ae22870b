"""Checkpoints that a crash or Ctrl-C cannot corrupt.

Layout: RUN_DIR/checkpoints/step-000010/{model/, reference/ (only after a refresh), trainer.pt, config.yaml}.
A checkpoint is written into a temporary sibling directory and renamed into place, so a
directory named step-N is always complete; half-written ones are ignored and cleaned up.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import torch

from rlvr.config import save_config
from rlvr.errors import UserError

PREFIX = "step-"


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step, or None."""
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return None
    done = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX) and p.name[len(PREFIX) :].isdigit()]
    return max(done, key=lambda p: int(p.name[len(PREFIX) :]), default=None)


def refuse_existing_run(run_dir: Path) -> None:
    """A fresh run must not start over a checkpointed one: it would append to the old metrics and
    skip saving at the steps the old run already saved."""
    if latest_checkpoint(run_dir) is not None:
        raise UserError(f"{run_dir} already holds a run: continue it with --resume {run_dir}, or pick another --output-dir")


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])


def save_checkpoint(
    run_dir: Path,
    step: int,
    *,
    policy: torch.nn.Module,
    tokenizer: Any,
    trainer_state: dict[str, Any],
    config: Any,
    reference: torch.nn.Module | None = None,
    keep: int = 2,
    extra_files: dict[str, str] | None = None,
) -> Path:
    """Write step `step` atomically; keep only the newest `keep` checkpoints (0 = all).

    `config` is any config dataclass; `extra_files` maps paths inside the checkpoint to text
    written before the rename, so they are as whole as the weights (e.g. "model/stats.json")."""
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{PREFIX}{step:06d}"
    if final.exists():
        return final
    tmp = root / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save_pretrained(tmp / "model")
    tokenizer.save_pretrained(tmp / "model")
    if reference is not None:
        reference.save_pretrained(tmp / "reference")
    torch.save({**trainer_state, "rng": rng_state()}, tmp / "trainer.pt")
    save_config(config, tmp / "config.yaml")
    for name, text in (extra_files or {}).items():
        (tmp / name).write_text(text)
    os.replace(tmp, final)
    _prune(root, keep)
    return final


def load_trainer_state(path: Path) -> dict[str, Any]:
    return torch.load(path / "trainer.pt", weights_only=False)


def _prune(root: Path, keep: int) -> None:
    for stale in root.glob(f".{PREFIX}*.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if keep <= 0:
        return
    done = sorted((p for p in root.iterdir() if p.name.startswith(PREFIX)), key=lambda p: p.name)
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
