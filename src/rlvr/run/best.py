"""The best checkpoint of a run, kept beside the latest (`keep_best`).

A late step can be worse than an earlier one: training on a few prompts at a time is noisy, and a run
that goes on too long can fall back. With keep_best, every evaluation (every eval_every steps, and the
last) is compared on its validation accuracy, which is measured on held-out prompts apart from those
reported (data.validation_size): choosing on the reported set would make the reported number of the
choice optimistic (the maximum of several noisy measurements). A better one (strictly: ties keep the
earlier) is saved as a checkpoint and linked to RUN_DIR/best, which outlives the rotation of
checkpoints/ and is a checkpoint like any other (`rlvr eval --model RUN_DIR/best`, `rlvr export`).

    RUN_DIR/best/{model/, trainer.pt, config.yaml, ..., best.json}   best.json: its step and evaluations

It is replaced atomically (written beside, then swapped by renames), so a crash leaves the old best or
the new one, never half of either; a resumed run takes the one on disk as the one to beat.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.paths import BEST as BEST

RECORD = "best.json"


@dataclass(frozen=True)
class Best:
    step: int
    score: float  # the validation accuracy (strict) it was chosen by
    evaluation: dict[str, Any]  # its held-out evaluation as the recipe made it (verdicts included, for the gain)


def score_of(evaluation: dict[str, Any] | None) -> float | None:
    """What the best is chosen by: the validation slice's strict accuracy (None: not measured)."""
    validation = (evaluation or {}).get("validation")
    return None if validation is None else float(validation["strict"]["mean"])


def better(evaluation: dict[str, Any] | None, best: Best | None) -> bool:
    """Whether `evaluation` beats the best so far (the first one measured always does; a tie does not)."""
    score = score_of(evaluation)
    return score is not None and (best is None or score > best.score)


def keep(run_dir: Path, evaluation: dict[str, Any], checkpoint: Path) -> Best:
    """Make `checkpoint` (of the step `evaluation` measured) the run's best: linked, not copied, where the
    file system allows, so that it costs no space while the checkpoint itself is still kept."""
    best = Best(evaluation["step"], score_of(evaluation) or 0.0, evaluation)
    final, new, old = run_dir / BEST, run_dir / f".{BEST}.new", run_dir / f".{BEST}.old"
    shutil.rmtree(new, ignore_errors=True)
    shutil.copytree(checkpoint, new, copy_function=_link_or_copy)
    (new / RECORD).write_text(json.dumps({"step": best.step, "score": best.score, "evaluation": evaluation}))
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(new, final)
    shutil.rmtree(old, ignore_errors=True)
    return best


def load(run_dir: Path) -> Best | None:
    """The best kept so far by the run in `run_dir` (a swap that a crash cut short is finished first)."""
    final, old = run_dir / BEST, run_dir / f".{BEST}.old"
    if not final.is_dir() and old.is_dir():
        os.replace(old, final)
    if not (final / RECORD).is_file():
        return None
    record = json.loads((final / RECORD).read_text())
    return Best(record["step"], record["score"], record["evaluation"])


def consider(run_dir: Path, evaluation: dict[str, Any] | None, best: Best | None, save: Callable[[], Path],
             main: bool) -> Best | None:
    """The best after `evaluation`: when it is better, its step is checkpointed (`save`, on every rank) and
    kept (rank 0). Every rank decides alike: the evaluation is the same on each."""
    if evaluation is None or not better(evaluation, best):
        return best
    checkpoint = save()
    return keep(run_dir, evaluation, checkpoint) if main else Best(evaluation["step"], score_of(evaluation) or 0.0,
                                                                  evaluation)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links
        shutil.copy2(source, target)
