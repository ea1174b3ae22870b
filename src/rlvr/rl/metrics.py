"""What a GRPO step reports, computed from its records in one call, and the groups it records.

    TrainBatch + update statistics + phase times ─step_metrics─▶ {name: number} ─▶ metrics.jsonl / TensorBoard

`reward/NAME/mean` is each reward's own mean; `accuracy` is the correctness reward's (rlvr.rl.reward_setup
says which one that is), and is not logged by a run that has none. What a reward logged with TRL's
`log_metric(name, value)` (rlvr.rewards.trainer_hooks) is logged as `name`: the mean of the step's values.

Data-parallel, every rank's scored groups are gathered first (`gather_step`), so the metrics are those
of the whole global batch, computed exactly as in one process (no means of per-rank means).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rlvr.advantages import zero_variance_groups
from rlvr.distributed.world import World, gather_across
from rlvr.errors import UserError
from rlvr.evaluate.emergence import length_quantiles, reflection_rate, reward_spread
from rlvr.models.devices import peak_memory_gb
from rlvr.records import Rollout, ScoredRollout, TrainBatch
from rlvr.rewards import workers
from rlvr.rl.dynamic import FillStats, concat_scored


@dataclass(frozen=True)
class MetricSources:
    """What the step's records do not hold: names and checks fixed for the run."""

    correctness: str | None  # the reward whose mean is logged as `accuracy` (None: no reward checks answers)
    reflection_phrases: list[str]
    format_check: Callable[..., list[Any]]  # the format reward the template asks for (boxed or think/answer)
    device: torch.device


@dataclass(frozen=True)
class StepRecord:
    """What the metrics are computed from: the step's scored groups and their completions' advantages."""

    scored: ScoredRollout
    advantages: torch.Tensor  # [N] one per completion (`completion_advantages`)
    fill: FillStats | None
    peak_memory_gb: float
    verifier_timeouts: int
    verifier_failures: int


def step_record(batch: TrainBatch, fill: FillStats | None, device: torch.device) -> StepRecord:
    verifier = workers.stats()  # cumulative: a rising count means answers that hit the time bound
    return StepRecord(batch.scored, completion_advantages(batch), fill, peak_memory_gb(device), verifier.timeouts,
                      verifier.failures)


def gather_step(record: StepRecord, world: World) -> StepRecord:
    """The whole global batch's record from every rank's (unchanged in one process): groups concatenated
    in rank order, sampling rounds the same on all ranks, counts summed, peak memory the largest."""
    if not world.distributed:
        return record
    parts = gather_across(record, world)
    fills = [p.fill for p in parts if p.fill is not None]
    fill = FillStats(max(f.rounds for f in fills), sum(f.dropped_groups for f in fills),
                     sum(f.padded_groups for f in fills)) if fills else None
    return StepRecord(concat_scored([p.scored for p in parts]), torch.cat([p.advantages for p in parts]), fill,
                      max(p.peak_memory_gb for p in parts), sum(p.verifier_timeouts for p in parts),
                      sum(p.verifier_failures for p in parts))


def step_metrics(record: StepRecord, updates: list[dict[str, float]], seconds: dict[str, float],
                 sources: MetricSources) -> dict[str, float]:
    """Everything worth plotting about one step. `updates` holds one entry per policy update (μ)."""
    scored, rollout, fill = record.scored, record.scored.rollout, record.fill
    lengths = rollout.lengths.float()
    m: dict[str, float] = {}
    m["reward/mean"], m["reward/std"] = _nan_stats(scored.rewards)
    m["reward/unscored"] = int(scored.rewards.isnan().sum())  # left out of the statistics and the loss
    for name, values in scored.reward_components.items():
        m[f"reward/{name}/mean"], m[f"reward/{name}/std"] = _nan_stats(values)
        m[f"reward/{name}/seconds"] = scored.reward_seconds.get(name, 0.0)
    if sources.correctness is not None:  # the correctness reward (rlvr.rl.reward_setup), never another
        m["accuracy"] = m[f"reward/{sources.correctness}/mean"]
    m["zero_variance_fraction"] = float(zero_variance_groups(scored.rewards).float().mean())
    m["advantage/abs_mean"] = float(record.advantages.abs().mean())
    m["completion_length/mean"], m["completion_length/max"] = float(lengths.mean()), float(lengths.max())
    m["truncation_rate"] = float(rollout.truncated.float().mean())
    # the step's first update (the weights the batch was sampled with); the rest average over μ
    for key in ("entropy", "lr", "sampler/logp_abs_diff_mean", "sampler/logp_abs_diff_max"):
        m[key] = updates[0][key]
    # the rollout correction's weights (rlvr.correction): π_old is the same in every update of the batch; and
    # whether the step was skipped (rlvr.rl.update: no reward signal before the first update)
    first = ("sampler/kl", "update/skipped")
    m.update({k: v for k, v in updates[0].items() if k.startswith("rollout_correction/") or k in first})
    for key in ("loss", "kl", "clip_low_fraction", "clip_high_fraction", "grad_norm"):
        m[key] = sum(u[key] for u in updates) / len(updates)
    m.update({f"time/{key}": value for key, value in seconds.items()})
    m["step_seconds"] = sum(seconds.values())
    m["tokens_per_second"] = float(lengths.sum()) / max(m["step_seconds"], 1e-9)
    m["memory/peak_gb"] = record.peak_memory_gb
    m.update(emergence_metrics(scored, sources.reflection_phrases, sources.format_check))
    m["verifier/timeouts"], m["verifier/failures"] = record.verifier_timeouts, record.verifier_failures
    if fill is not None:
        m["sampling/rounds"], m["sampling/dropped_groups"], m["sampling/padded_groups"] = (
            fill.rounds, fill.dropped_groups, fill.padded_groups
        )
    return {**m, **logged_metrics(scored, set(m))}


def logged_metrics(scored: ScoredRollout, taken: set[str]) -> dict[str, float]:
    """The mean of each metric the step's rewards logged (TRL's log_metric: every call on every rank counts
    once, as in TRL); a name among rlvr's own metrics (`taken`) is refused."""
    clash = sorted(set(scored.logged_metrics) & taken)
    if clash:
        raise UserError(f"a reward logged the metric {clash[0]!r} (log_metric), a name rlvr logs itself: log it "
                        "under another name")
    return {name: sum(values) / len(values) for name, values in scored.logged_metrics.items()}


def control_metrics(trained: ScoredRollout, world: World) -> dict[str, float]:
    """A control run's made-up rewards (rlvr.rewards.control), over the global batch: what it trained on."""
    rewards = torch.cat([r.view(-1) for r in gather_across(trained.rewards, world)])
    return {"control/reward/mean": _nan_stats(rewards)[0]}


def emergence_metrics(scored: ScoredRollout, phrases: list[str],
                      format_check: Callable[..., list[Any]]) -> dict[str, float]:
    """Length distribution, reflection rate, share in the expected format, per-group reward spread
    (evaluate/emergence.py)."""
    r = scored.rollout
    m = {f"completion_length/{k}": v for k, v in length_quantiles(r.lengths.tolist()).items()}
    m["reflection_rate"] = reflection_rate(r.completions, phrases)
    m["format_share"] = sum(v == 1.0 for v in format_check(r.completions)) / max(1, len(r.completions))
    m.update({f"groups/reward_{k}": v for k, v in reward_spread(scored.rewards).items()})
    return m


def completion_advantages(batch: TrainBatch) -> torch.Tensor:
    """[N] one advantage per completion: its first token's (all of them under outcome supervision); a harness
    trajectory's, of its rows (they share it)."""
    if batch.rollout.row_trajectory is None:
        return batch.advantages[:, 0]
    return torch.zeros(batch.scored.rewards.numel()).index_copy_(0, batch.rollout.row_trajectory,
                                                                 batch.advantages[:, 0].float())


def completion_tokens(rollout: Rollout) -> torch.Tensor:
    """[N] tokens sampled in each completion (a harness trajectory: over all its rows)."""
    if rollout.row_trajectory is None:
        return rollout.lengths
    return torch.zeros(rollout.num_prompts * rollout.group_size, dtype=torch.long).index_add_(
        0, rollout.row_trajectory, rollout.lengths)


def sample_groups(batch: TrainBatch, groups: int = 2) -> list[dict[str, Any]]:
    """The first groups of the step as samples.jsonl rows: prompt, completions, rewards, advantages, tokens. An
    agent's runs (rlvr.harness) show the prompt its first run sent, not the dataset's row."""
    r, g, advantages = batch.rollout, batch.rollout.group_size, completion_advantages(batch)
    extra = batch.scored.extra_columns
    tokens = completion_tokens(r)

    def prompt(p: int) -> Any:
        sent = [t[0]["content"] for t in (r.transcripts or [])[p * g:(p + 1) * g] if t and t[0]["role"] == "prompt"]
        return sent[0] if sent else r.examples[p].prompt

    return [{
        "prompt": prompt(p), "completions": r.completions[p * g:(p + 1) * g],
        "rewards": [None if math.isnan(v) else v for v in batch.scored.rewards[p].tolist()],  # None = unscored
        "advantages": advantages[p * g:(p + 1) * g].tolist(),
        "tokens": tokens[p * g:(p + 1) * g].tolist(),
        # with an environment: each conversation after the prompt (model, tool and user turns)
        **({"transcripts": r.transcripts[p * g:(p + 1) * g]} if r.transcripts is not None else {}),
        # what the rewards logged with TRL's log_extra, one value per completion
        **({"extra": {k: v[p * g:(p + 1) * g] for k, v in extra.items()}} if extra else {}),
    } for p in range(min(groups, r.num_prompts))]


def _nan_stats(values: torch.Tensor) -> tuple[float, float]:
    """Mean and population std over the non-NaN entries (NaN = reward not applicable)."""
    v = values[~torch.isnan(values)]
    if v.numel() == 0:
        return math.nan, math.nan
    return float(v.mean()), float(v.std(correction=0))
