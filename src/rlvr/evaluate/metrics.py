"""Sampling metrics of reasoning benchmarks: unbiased pass@k and majority vote (maj@k, cons@k).

pass@k follows Chen et al. 2021 ("Evaluating Large Language Models Trained on Code", Eq. 1):
with n samples of which c are correct, pass@k = 1 − C(n − c, k) / C(n, k), the probability that
at least one of k samples drawn without replacement is correct. It is computed as a product,
never through factorials, so n in the thousands is exact to float precision.
"""

from __future__ import annotations

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
