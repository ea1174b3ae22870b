"""The per-step log of a run: metrics.jsonl (one JSON object per step) mirrored to TensorBoard.

A resumed run first drops what an interrupted session logged after the checkpoint it resumes from,
so every step appears once, with the numbers of the session that checkpointed it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rlvr import paths


class MetricsWriter:
    """Appends one JSON object per step to metrics.jsonl (flushed at once) and mirrors it to TensorBoard.

    `resume_step`: the step a resumed run continues from; lines and events after it are discarded.
    """

    def __init__(self, run_dir: Path, tensorboard: bool = True, resume_step: int | None = None):
        self.path = run_dir / paths.METRICS
        if resume_step is not None:
            truncate_jsonl(self.path, resume_step)
        self._file = self.path.open("a")
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is a declared dependency; a stripped install only loses the mirror
                return
            purge = None if resume_step is None else resume_step + 1
            self._tb = SummaryWriter(str(run_dir / paths.TENSORBOARD), purge_step=purge)

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        # JSON has no NaN: a metric that could not be measured is null
        numbers = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}
        record = {"step": step, **numbers}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def truncate_jsonl(path: Path, step: int) -> None:
    """Keep the whole lines of `path` whose "step" is at most `step` (a torn last line is dropped too)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line)["step"] <= step:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            continue
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
