"""Sampling metrics of reasoning benchmarks: unbiased pass@k and majority vote (maj@k, cons@k).

pass@k follows Chen et al. 2021 ("Evaluating Large Language Models Trained on Code", Eq. 1):
with n samples of which c are correct, pass@k = 1 − C(n − c, k) / C(n, k), the probability that
at least one of k samples drawn without replacement is correct. It is computed as a product,
never through factorials, so n in the thousands is exact to float precision.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem.

    >>> pass_at_k(10, 0, 1), pass_at_k(10, 10, 1), round(pass_at_k(10, 3, 1), 12)
    (0.0, 1.0, 0.3)
    >>> round(pass_at_k(10, 3, 5), 4)   # 1 − C(7,5)/C(10,5) = 1 − 21/252
    0.9167
    >>> pass_at_k(5, 3, 4)              # fewer than k wrong samples: any k samples include a right one
    1.0
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    # C(n−c, k) / C(n, k) = Π_{i = n−c+1}^{n} (1 − k / i)
    ratio = 1.0
    for i in range(n - c + 1, n + 1):
        ratio *= 1.0 - k / i
    return 1.0 - ratio


def maj_at_k(answers: Sequence[Hashable | None], correct: Sequence[bool], k: int | None = None) -> float:
    """Majority vote over the first k extracted answers (all of them when k is None).

    `answers[i]` is sample i's extracted answer (None = nothing extracted: it does not vote) and
    `correct[i]` whether that answer is right; samples with the same answer must agree on
    `correct`. Ties: when m answers share the top count, the vote is a uniformly random one of
    them, so the score is the expected value — (number of correct answers among them) / m.
    No answer at all scores 0.

    >>> maj_at_k(["4", "4", "5"], [True, True, False])
    1.0
    >>> maj_at_k(["4", "5", None, None], [True, False, False, False])  # a 1–1 tie: half credit
    0.5
    >>> maj_at_k(["5", "5", "4", "4", "4"], [False, False, True, True, True], k=3)  # first 3 only
    0.0
    """
    if len(answers) != len(correct):
        raise ValueError("answers and correct must have the same length")
    k = len(answers) if k is None else k
    if not 1 <= k <= len(answers):
        raise ValueError(f"maj@k needs 1 <= k <= {len(answers)}, got {k}")
    votes = Counter(a for a in answers[:k] if a is not None)
    if not votes:
        return 0.0
    verdict: dict[Hashable, bool] = {}
    for a, ok in zip(answers[:k], correct[:k]):
        if a is not None and verdict.setdefault(a, ok) != ok:
            raise ValueError(f"answer {a!r} is marked both correct and incorrect")
    top = max(votes.values())
    winners = [a for a, count in votes.items() if count == top]
    return sum(verdict[a] for a in winners) / len(winners)


def best_of_n(scores: Sequence[float], correct: Sequence[bool | float], n: int) -> float:
    """Expected accuracy of best-of-n: draw n of the samples without replacement, keep the top-scored one.

    `scores[i]` is what the selector (a reward or process-reward model) gave sample i, `correct[i]`
    its verdict. Like pass@k this is the exact expectation over all C(len, n) draws, not one draw:
    the top draw falls in score level L when it avoids every sample scored above L and includes
    at least one at L; ties within a level are broken uniformly at random. NaN scores rank last.

    >>> best_of_n([0.9, 0.1, 0.5], [False, True, True], 1)   # one draw: plain mean accuracy
    0.6666666666666666
    >>> best_of_n([0.9, 0.1, 0.5], [False, True, True], 3)   # all three: the top one is wrong
    0.0
    >>> best_of_n([0.9, 0.1, 0.5], [False, True, True], 2)   # pairs {0,1}, {0,2} wrong; {1,2} right
    0.3333333333333333
    """
    total = len(scores)
    if len(correct) != total:
        raise ValueError("scores and correct must have the same length")
    if not 1 <= n <= total:
        raise ValueError(f"best-of-n needs 1 <= n <= {total}, got {n}")
    levels: dict[float, list[float]] = {}
    for score, ok in zip(scores, correct):
        levels.setdefault(-math.inf if math.isnan(score) else score, []).append(float(ok))
    draws = math.comb(total, n)
    above, expected = 0, 0.0
    for level in sorted(levels, reverse=True):
        members = levels[level]
        top_here = math.comb(total - above, n) - math.comb(total - above - len(members), n)
        expected += (sum(members) / len(members)) * (top_here / draws)
        above += len(members)
    return expected
