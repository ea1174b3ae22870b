"""Per-step training metrics: computed from the step's records, written to metrics.jsonl and TensorBoard."""

from __future__ import annotations

import json
import math
from pathlib import Path
from collections.abc import Callable
from typing import Any

import torch

from rlvr.advantages import zero_variance_groups
from rlvr.evaluate.emergence import length_quantiles, reflection_rate, reward_spread
from rlvr.records import ScoredRollout, TrainBatch


def _nan_stats(values: torch.Tensor) -> tuple[float, float]:
    """Mean and population std over the non-NaN entries (NaN = reward not applicable)."""
    v = values[~torch.isnan(values)]
    if v.numel() == 0:
        return math.nan, math.nan
    return float(v.mean()), float(v.std(correction=0))


def emergence_metrics(scored: ScoredRollout, phrases: list[str], format_check: Callable[..., list]) -> dict[str, float]:
    """Length distribution, reflection rate, share in the expected format, per-group reward spread (evaluate/emergence.py)."""
    r = scored.rollout
    m = {f"completion_length/{k}": v for k, v in length_quantiles(r.lengths.tolist()).items()}
    m["reflection_rate"] = reflection_rate(r.completions, phrases)
    m["format_share"] = sum(v == 1.0 for v in format_check(r.completions)) / max(1, len(r.completions))
    m.update({f"groups/reward_{k}": v for k, v in reward_spread(scored.rewards).items()})
    return m


def step_metrics(batch: TrainBatch, updates: list[dict[str, float]], seconds: dict[str, float]) -> dict[str, float]:
    """Everything worth plotting about one step. `updates` holds one entry per policy update (μ)."""
    scored, rollout = batch.scored, batch.rollout
    lengths = rollout.lengths.float()
    m: dict[str, float] = {}
    m["reward/mean"], m["reward/std"] = float(scored.rewards.mean()), float(scored.rewards.std(correction=0))
    for i, (name, values) in enumerate(scored.reward_components.items()):
        m[f"reward/{name}/mean"], m[f"reward/{name}/std"] = _nan_stats(values)
        m[f"reward/{name}/seconds"] = scored.reward_seconds.get(name, 0.0)
        if i == 0:  # the first reward in the config is the task's correctness check
            m["accuracy"] = m[f"reward/{name}/mean"]
    m["zero_variance_fraction"] = float(zero_variance_groups(scored.rewards).float().mean())
    m["advantage/abs_mean"] = float(batch.advantages.abs().mean())
    m["completion_length/mean"], m["completion_length/max"] = float(lengths.mean()), float(lengths.max())
    m["truncation_rate"] = float(rollout.truncated.float().mean())
    first = updates[0]
    m["entropy"] = first["entropy"]
    m["lr"] = first["lr"]  # the rate of the step's first update; the others are averaged over the μ updates
    for key in ("loss", "kl", "clip_low_fraction", "clip_high_fraction", "grad_norm"):
        m[key] = sum(u[key] for u in updates) / len(updates)
    for key, value in seconds.items():
        m[f"time/{key}"] = value
    m["step_seconds"] = sum(seconds.values())
    m["tokens_per_second"] = float(lengths.sum()) / max(m["step_seconds"], 1e-9)
    return m


class MetricsWriter:
    """Appends one JSON object per step to metrics.jsonl (flushed at once) and mirrors it to TensorBoard."""

    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.path = run_dir / "metrics.jsonl"
        self._file = self.path.open("a")
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is a declared dependency; a stripped install only loses the mirror
                SummaryWriter = None
            if SummaryWriter is not None:
                self._tb = SummaryWriter(str(run_dir / "tensorboard"))

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        record = {"step": step, **{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}}
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
