"""From problem records to the numbers people quote: pass@1, pass@k, maj@k, best-of-N, curves.

Conventions (all recorded in the summary next to the numbers):

- a problem whose gold answer the verifier cannot read is left out of every metric (and counted);
  a single completion the verifier could not judge (a sandbox failure) counts as wrong, and is counted;
- greedy pass@1 has a Wilson interval; pass@1 over n samples is the mean of per-problem means, with
  a normal interval over problems;
- pass@k is Chen et al.'s unbiased estimator; best-of-N by a model is its exact expectation over
  draws of N (metrics.best_of_n); best-of-N by the verifier (the oracle) is pass@N;
- maj@k is the mean majority vote over the n // k disjoint blocks of k samples (k = n: cons@n;
  k = 1: pass@1), which uses every sample instead of only the first k; an answer's verdict is that
  of any sample giving it correctly (a sample can give the right answer and still fail, e.g. by
  boxing two answers);
- the thinking-length curve is pass@1 with every completion cut to the budget.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, cast

from rlvr.config.choices import MODES
from rlvr.data.templates import expected_format
from rlvr.evaluate.accuracy import mean_interval, wilson_interval
from rlvr.evaluate.emergence import length_quantiles, reflection_rate
from rlvr.evaluate.metrics import best_of_n, maj_at_k, pass_at_k
from rlvr.evaluate.records import ProblemRecord, SampleRecord
from rlvr.rewards.registry import BUILTIN_REWARDS


def curve_points(n: int) -> list[int]:
    """1, 2, 4, ... up to n, with n itself last.

    >>> curve_points(1), curve_points(6), curve_points(8)
    ([1], [1, 2, 4, 6], [1, 2, 4, 8])
    """
    points = [1]
    while points[-1] * 2 < n:
        points.append(points[-1] * 2)
    return points if points[-1] == n else [*points, n]


def summarise(records: list[ProblemRecord], settings: dict[str, Any]) -> dict[str, Any]:
    """summary.json's content for the finished `records` under `settings`."""
    n = settings["samples"]
    scored = any(s.score is not None for r in records for s in r.samples)
    summary: dict[str, Any] = {"settings": settings, "problems": len(records)}
    for mode in MODES:
        judged = [r for r in records if r.checkable(mode)]
        summary[mode] = {
            "problems": len(judged),
            "unjudged_samples": sum(s.correct[mode] is None for r in judged for s in r.samples),
            "greedy": _greedy(judged, mode),
            **(_sampled(judged, mode, settings, scored) if n else NO_SAMPLES),
        }
    # the sampled completions, or the greedy ones when none were sampled
    samples = [s for r in records for s in r.samples] or [r.greedy for r in records if r.greedy is not None]
    summary["completions"] = {
        "count": len(samples),
        "mean_tokens": _mean([s.tokens for s in samples]),
        "tokens": length_quantiles([s.tokens for s in samples]),
        "truncated": _mean([float(s.truncated) for s in samples]),
        "reflection_rate": reflection_rate([s.text for s in samples]),  # DeepSeek-R1's "wait, ..." (emergence.py)
        "format_share": _mean(_formatted([s.text for s in samples], settings["template"])),
    }
    return summary


# a greedy-only evaluation (samples = 0) has no sampled metrics
NO_SAMPLES: dict[str, Any] = {"pass@1": None, "pass@k": {}, "maj@k": None, "curves": None}


def _sampled(judged: list[ProblemRecord], mode: str, settings: dict[str, Any], scored: bool) -> dict[str, Any]:
    """pass@1, pass@k, maj@k and the curves of the n completions sampled for each problem."""
    n, ks, points, voting = settings["samples"], settings["k"], curve_points(settings["samples"]), settings["voting"]
    verdicts = [[_ok(s, mode) for s in r.samples] for r in judged]
    return {
        "pass@1": asdict(mean_interval([sum(v) / n for v in verdicts])),
        "pass@k": {str(k): _mean([pass_at_k(n, int(sum(v)), k) for v in verdicts]) for k in ks},
        "maj@k": {str(k): _mean([_majority(r, mode, k) for r in judged]) for k in ks} if voting else None,
        "curves": {
            "n": points,
            "oracle": [_mean([pass_at_k(n, int(sum(v)), m) for v in verdicts]) for m in points],
            "majority": [_mean([_majority(r, mode, m) for r in judged]) for m in points] if voting else None,
            "model": [_mean([best_of_n([_rank(s) for s in r.samples], v, m) for r, v in zip(judged, verdicts)])
                      for m in points] if scored else None,
            "budgets": settings["budgets"],
            # (each judged problem has its n > 0 samples here: no inner mean is None)
            "budget_pass@1": [_mean(cast(list[float], [_mean([_ok_at(s, mode, j) for s in r.samples]) for r in judged]))
                              for j in range(len(settings["budgets"]))],
        },
    }


def _formatted(texts: list[str], template: str) -> list[float]:
    """1.0 per completion in the expected format: <think>/<answer> under r1_zero, else one boxed answer."""
    return cast(list[float], BUILTIN_REWARDS[expected_format(template)](texts))


def _ok(sample: SampleRecord, mode: str) -> float:
    return sample.correct[mode] or 0.0


def _ok_at(sample: SampleRecord, mode: str, j: int) -> float:
    return sample.budget_correct[mode][j] or 0.0


def _rank(sample: SampleRecord) -> float:
    return float("nan") if sample.score is None else sample.score


def _greedy(judged: list[ProblemRecord], mode: str) -> dict[str, float] | None:
    greedy = [r.greedy for r in judged if r.greedy is not None]
    if not greedy:
        return None
    return asdict(wilson_interval(int(sum(_ok(g, mode) for g in greedy)), len(greedy)))


def _majority(record: ProblemRecord, mode: str, k: int) -> float:
    """maj@k of one problem: the mean vote over the n // k disjoint blocks of k consecutive samples
    (k = n is the usual cons@n; k = 1 is pass@1). An answer is right when any sample giving it was
    judged right."""
    answers = [s.answer[mode] for s in record.samples]
    right = {a for s, a in zip(record.samples, answers) if a is not None and _ok(s, mode) == 1.0}
    blocks = [answers[start:start + k] for start in range(0, len(answers) - k + 1, k)]
    return sum(maj_at_k(block, [a in right for a in block]) for block in blocks) / len(blocks)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
