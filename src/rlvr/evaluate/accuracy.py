"""Held-out accuracy with 95% intervals, greedy decoding, strict and lenient answer extraction."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from rlvr.distributed.world import SINGLE, World, gather_across, shard, unshard
from rlvr.rewards import RewardSpec
from rlvr.rewards.batch import score_rollout
from rlvr.rollout import SamplingParams
from rlvr.samplers import Prompt, Sampler, SampleRequest
from rlvr.seeds import seed_of

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{100 * self.mean:.1f}% [{100 * self.low:.1f}, {100 * self.high:.1f}]"


def wilson_interval(correct: float, total: int, z: float = Z95) -> Interval:
    """Wilson score interval for a proportion of `correct` out of `total` (ties may count half; well-behaved at 0%
    and 100%, unlike the normal one).

    >>> i = wilson_interval(0, 100); (i.mean, round(i.low, 3), round(i.high, 3))
    (0.0, 0.0, 0.037)
    """
    if total == 0:
        return Interval(math.nan, math.nan, math.nan)
    p = correct / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))


def mean_interval(values: list[float], z: float = Z95) -> Interval:
    """Mean of per-problem scores in [0, 1] with a 95% normal interval (problems are the sampled units).

    Used for pass@1 averaged over n samples per problem: each problem contributes its own mean,
    so the interval reflects problem-to-problem spread, not the n samples as if independent.

    >>> i = mean_interval([0.0, 0.5, 1.0, 0.5]); (i.mean, round(i.low, 3), round(i.high, 3))
    (0.5, 0.1, 0.9)
    """
    if not values:
        return Interval(math.nan, math.nan, math.nan)
    t = torch.tensor(values, dtype=torch.float64)
    mean = float(t.mean())
    half = z * float(t.std(correction=1)) / math.sqrt(len(values)) if len(values) > 1 else math.inf
    return Interval(mean, max(0.0, mean - half), min(1.0, mean + half))


def paired_gain_interval(before: list[float], after: list[float], z: float = Z95) -> Interval:
    """Mean of after − before over the same problems, with a 95% interval.

    For 0/1 scores: Newcombe's hybrid score interval for paired proportions (Newcombe 1998,
    method 10), which stays sensible when every problem moved the same way. Otherwise a normal
    interval on the paired differences.

    >>> g = paired_gain_interval([0] * 33, [1] * 33)
    >>> round(g.mean, 3), round(g.low, 3), round(g.high, 3)
    (1.0, 0.853, 1.0)
    """
    if len(before) != len(after) or not before:
        raise ValueError("paired gain needs two equally long, non-empty lists")
    n = len(before)
    if set(before) | set(after) <= {0, 1}:
        return _newcombe_paired(before, after, z)
    d = torch.tensor(after, dtype=torch.float64) - torch.tensor(before, dtype=torch.float64)
    mean = float(d.mean())
    half = z * float(d.std(correction=1)) / math.sqrt(n) if n > 1 else math.inf
    return Interval(mean, mean - half, mean + half)


def _newcombe_paired(before: list[float], after: list[float], z: float) -> Interval:
    n = len(before)
    both = sum(1 for x, y in zip(before, after) if x and y)
    lost = sum(1 for x, y in zip(before, after) if x and not y)
    gained = sum(1 for x, y in zip(before, after) if not x and y)
    neither = n - both - lost - gained
    p_after, p_before = (both + gained) / n, (both + lost) / n
    a_ci, b_ci = wilson_interval(both + gained, n, z), wilson_interval(both + lost, n, z)
    denom = (both + lost) * (gained + neither) * (both + gained) * (lost + neither)
    phi = (both * neither - lost * gained) / math.sqrt(denom) if denom > 0 else 0.0
    delta = math.sqrt(max(0.0, (p_after - a_ci.low) ** 2 - 2 * phi * (p_after - a_ci.low) * (b_ci.high - p_before)
                               + (b_ci.high - p_before) ** 2))
    eps = math.sqrt(max(0.0, (a_ci.high - p_after) ** 2 - 2 * phi * (a_ci.high - p_after) * (p_before - b_ci.low)
                             + (p_before - b_ci.low) ** 2))
    diff = p_after - p_before
    return Interval(diff, max(-1.0, diff - delta), min(1.0, diff + eps))


@dataclass
class EvalResult:
    """Each example's greedy completion and verdicts; the rest is derived from them. The strict verifier
    decides which problems count: one it cannot score (NaN, not applicable) is left out of both."""

    strict_scores: list[float]  # per example, 1/0, NaN where not applicable
    lenient_scores: list[float]
    completions: list[str]

    @property
    def strict_correct(self) -> list[float]:
        """Per counted problem, 1/0."""
        return [s for s in self.strict_scores if not math.isnan(s)]

    @property
    def lenient_correct(self) -> list[float]:
        """Per counted problem, 1/0 (a lenient NaN counts as wrong)."""
        return [0.0 if math.isnan(v) else v for s, v in zip(self.strict_scores, self.lenient_scores, strict=True)
                if not math.isnan(s)]

    @property
    def strict(self) -> Interval:
        return wilson_interval(int(sum(self.strict_correct)), len(self.strict_correct))

    @property
    def lenient(self) -> Interval:
        return wilson_interval(int(sum(self.lenient_correct)), len(self.lenient_correct))

    def summary(self) -> dict[str, Any]:
        return {"n": len(self.strict_correct), "strict": asdict(self.strict), "lenient": asdict(self.lenient)}


def evaluate_accuracy(
    sampler: Sampler,
    prompts: list[Prompt],
    *,
    strict: Callable[..., list[float | None]],
    lenient: Callable[..., list[float | None]],
    max_new_tokens: int,
    batch_prompts: int = 32,
    seed: int = 0,
    world: World = SINGLE,
) -> EvalResult:
    """Greedy completion of every prompt by `sampler` (one completion, or a conversation when it converses with
    an environment: the verifiers then score the final message), scored by the strict and the lenient
    verifier. Each prompt's seed is (seed, its row) alone (an environment's task is drawn from it), so two
    evaluations of the same prompts are paired. Data-parallel, each rank completes every world.size-th
    prompt and all ranks get the whole result, in order."""
    if world.distributed:
        part = evaluate_accuracy(sampler, shard(prompts, world), strict=strict, lenient=lenient,
                                 max_new_tokens=max_new_tokens, batch_prompts=batch_prompts, seed=seed)
        return _merge(gather_across(part, world))
    strict_scores: list[float] = []
    lenient_scores: list[float] = []
    texts: list[str] = []
    params = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0)
    specs = [RewardSpec("strict", strict), RewardSpec("lenient", lenient)]
    for start in range(0, len(prompts), batch_prompts):
        chunk = prompts[start:start + batch_prompts]
        out = sampler.sample([SampleRequest(p, (seed_of(seed, p.example.index),)) for p in chunk], params)
        scored = score_rollout(out, specs)
        strict_scores += scored.reward_components["strict"].view(-1).tolist()
        lenient_scores += scored.reward_components["lenient"].view(-1).tolist()
        texts += out.completions
    return EvalResult(strict_scores, lenient_scores, texts)


def _merge(parts: list[EvalResult]) -> EvalResult:
    """The result of the examples that `shard` split across ranks, from each rank's, in the examples' order."""
    return EvalResult(unshard([p.strict_scores for p in parts]), unshard([p.lenient_scores for p in parts]),
                      unshard([p.completions for p in parts]))
