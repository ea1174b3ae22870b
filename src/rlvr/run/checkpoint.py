"""Checkpoints that a crash or Ctrl-C cannot corrupt.

Layout (rlvr.paths): RUN_DIR/checkpoints/step-000010/{model/, ..., trainer.pt, config.yaml}. A
checkpoint is written into a temporary sibling directory and renamed into place, so a directory
named step-N is always complete; half-written ones are ignored and cleaned up.

What goes in is the loop's business: `write(folder)` saves its models (model/ with the tokenizer,
and whatever else it needs: a refreshed reference, a critic), `state` is everything else resume
needs (optimizer, scheduler, data order, step, the "before" evaluation), saved with the RNG state.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rlvr import moved, paths
from rlvr.config import save_config
from rlvr.errors import UserError
from rlvr.intact import write_manifest
from rlvr.models.adapters import has_adapters
from rlvr.models.files import match_umask


def save_checkpoint(run_dir: Path, step: int, *, write: Callable[[Path], None], state: dict[str, Any], config: Any,
                    keep: int = 2, tmp: Path | None = None) -> Path:
    """Write step `step` atomically; keep only the newest `keep` checkpoints (0 = all). `tmp`: the temporary
    folder, when other processes have written into it already (rlvr.run.sharded)."""
    final = paths.step_dir(run_dir, step)
    if final.exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    if tmp is None:
        tmp = temporary_dir(final, os.getpid())
        shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(exist_ok=True)
        write(tmp)
        torch.save({**state, "rng": rng_state()}, tmp / paths.TRAINER_STATE)
        save_config(config, tmp / paths.CONFIG)
        write_manifest(tmp)  # (last: what a resume checks every file against, rlvr.intact)
        os.replace(tmp, final)
    except BaseException as error:  # the half-written copy goes; the earlier checkpoints are untouched
        full = out_of_space(error, final.parent)
        shutil.rmtree(tmp, ignore_errors=True)
        if full:
            raise disk_full(run_dir, step) from None
        raise
    _prune(final.parent, keep)
    return final


def disk_full(run_dir: Path, step: int) -> UserError:
    """The one-line error of a checkpoint that did not fit on the disk."""
    return UserError(f"no space left on the disk of {run_dir} to save step {step}: the half-written checkpoint "
                     "was removed and the earlier ones are intact; free some space and continue with --resume "
                     f"{run_dir}")


def temporary_dir(final: Path, pid: int) -> Path:
    """Where checkpoint `final` is written before it is renamed into place (stale ones are pruned)."""
    return final.with_name(f".{final.name}.tmp-{pid}")


def run_out_of_space(run_dir: Path) -> UserError:
    """The one-line error of a run whose disk filled up outside a checkpoint (rlvr.run.lock): at the start
    (the lock, config.yaml, metrics.jsonl) or while it logs."""
    fix = "start it again" if paths.latest_checkpoint(run_dir) is None else f"continue with --resume {run_dir}"
    return UserError(f"no space left on the disk of {run_dir}: free some space and {fix}")


def no_space_left(error: BaseException) -> bool:
    """Whether `error` says that the disk, or the user's quota on it, is full."""
    return getattr(error, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(error)


def out_of_space(error: BaseException, folder: Path) -> bool:
    """Whether `error`, raised while writing into `folder`, means the disk is full. torch.save reports a
    full disk only as "unexpected pos", so a folder with less than a mebibyte free counts too."""
    if no_space_left(error):
        return True
    try:
        return shutil.disk_usage(folder).free < 2**20
    except OSError:
        return False


def load_state(checkpoint: Path) -> dict[str, Any]:
    """The trainer state saved with a checkpoint (RNG state included, under "rng")."""
    state: dict[str, Any] = torch.load(checkpoint / paths.TRAINER_STATE, weights_only=False,
                                       pickle_module=moved)  # (objects by the module paths they were saved under)
    return state


def save_pretrained(folder: Path, model: Any, tokenizer: Any = None, state_dict: dict[str, Any] | None = None) -> None:
    """A transformers model (and its tokenizer) in `folder`, loadable with from_pretrained; `state_dict`: its
    weights when the model holds only a shard of them (gathered by rlvr.distributed.parallel.full_state_dict)."""
    # adapters alone for a peft model (rlvr.models.adapters): not its embeddings, which it would otherwise
    # decide by looking the base model up, on the hub when the base is not a local folder
    model.save_pretrained(folder, state_dict=state_dict, **({"save_embedding_layers": False}
                                                             if has_adapters(model) else {}))
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    match_umask(folder)  # the weights readable as the other files are, not 0600


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])


def _prune(root: Path, keep: int) -> None:
    for stale in root.glob(f".{paths.STEP_PREFIX}*.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if keep <= 0:
        return
    done = sorted((p for p in root.iterdir() if p.name.startswith(paths.STEP_PREFIX)), key=lambda p: p.name)
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
