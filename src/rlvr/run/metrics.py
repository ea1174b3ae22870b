"""The per-step log of a run: metrics.jsonl (one JSON object per step), mirrored to its trackers.

A resumed run first drops what an interrupted session logged after the checkpoint it resumes from,
so every step appears once, with the numbers of the session that checkpointed it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from rlvr import paths
from rlvr.run.trackers import Tracker, sample_rows


class MetricsWriter:
    """Appends one JSON object per step to metrics.jsonl (flushed at once) and hands the same numbers, the
    sample groups and the closing summary to the run's trackers (rlvr.run.trackers).

    `resume_step`: the step a resumed run continues from; lines after it are discarded.
    """

    def __init__(self, run_dir: Path, resume_step: int | None = None, trackers: Sequence[Tracker] = ()):
        self.path = run_dir / paths.METRICS
        if resume_step is not None:
            truncate_jsonl(self.path, resume_step)
        self._file = self.path.open("a")
        self.trackers = list(trackers)

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        # JSON has no NaN: a metric that could not be measured is null
        numbers = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}
        record = {"step": step, **numbers}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        self.to_trackers(step, metrics)

    def to_trackers(self, step: int, metrics: dict[str, Any]) -> None:
        """Numbers for the trackers only (the held-out evaluation before the first step, at step 0)."""
        for tracker in self.trackers:
            tracker.metrics(step, metrics)

    def samples(self, step: int, groups: list[dict[str, Any]]) -> None:
        rows = sample_rows(step, groups)
        for tracker in self.trackers:
            tracker.samples(step, rows)

    def summary(self, step: int, summary: dict[str, Any]) -> None:
        for tracker in self.trackers:
            tracker.summary(step, summary)

    def close(self) -> None:
        self._file.close()
        for tracker in self.trackers:
            tracker.close()


def signed(value: Any) -> str:
    """A reward or advantage for people to read: signed, two decimals; "unscored" where a reward is missing
    (None in samples.jsonl, NaN in the step's records: rlvr.rewards.batch.unscored).

    >>> signed(0.5), signed(-1), signed(None), signed(float("nan")), signed("1.0")
    ('+0.50', '-1.00', 'unscored', 'unscored', "'1.0'")
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "unscored"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:+.2f}"
    return repr(value)


def truncate_jsonl(path: Path, step: int) -> None:
    """Keep the whole lines of `path` whose "step" is at most `step` (a torn last line is dropped too)."""
    if not path.is_file():
        return
    kept = []  # (bytes that are not UTF-8, appended by something else, are no step's line: dropped like a torn one)
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            if json.loads(line)["step"] <= step:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            continue
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


def record_samples(run_dir: Path, step: int, groups: list[dict[str, Any]], shown: int = 4) -> None:
    """Append the step's groups to samples.jsonl and print the first completions of the first group."""
    with (run_dir / paths.SAMPLES).open("a", encoding="utf-8") as f:
        for group in groups:
            f.write(json.dumps({"step": step, **group}, ensure_ascii=False) + "\n")
    first = groups[0]
    tqdm.write(f"── samples at step {step}: prompt {first['prompt']!r:.120}")
    for text, reward, advantage in list(zip(first["completions"], first["rewards"], first["advantages"]))[:shown]:
        tqdm.write(f"  reward {signed(reward)}  advantage {signed(advantage)}  {text.replace(chr(10), '⏎')[:160]!r}")
