"""pass@k against brute-force enumeration; maj@k ties as documented."""

import itertools
import random
from math import comb

import pytest

from rlvr.evaluate import maj_at_k, pass_at_k


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_equals_enumeration_over_all_k_subsets(n):
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(range(n), k))
            brute = sum(any(samples[i] for i in s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12)


def test_pass_at_k_is_stable_for_large_n():
    # the factorial form overflows floats here; the product form stays exact enough
    assert pass_at_k(2000, 1, 1) == pytest.approx(1 / 2000)
    assert pass_at_k(2000, 10, 100) == pytest.approx(1 - comb(1990, 100) / comb(2000, 100), rel=1e-9)


def test_pass_at_k_rejects_impossible_counts():
    for args in ((5, 6, 1), (5, 2, 0), (5, 2, 6), (5, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*args)


def test_maj_at_k_equals_random_tie_breaking_in_expectation():
    rng = random.Random(0)
    answers = ["a", "b", "b", "a", None, "c"]
    correct = [True, False, False, True, False, False]
    wins = 0
    for _ in range(20000):
        votes = {}
        for ans in answers:
            if ans is not None:
                votes[ans] = votes.get(ans, 0) + 1
        top = max(votes.values())
        wins += rng.choice([x for x, v in votes.items() if v == top]) == "a"
    assert maj_at_k(answers, correct) == 0.5
    assert wins / 20000 == pytest.approx(0.5, abs=0.02)


def test_maj_at_k_edge_cases():
    assert maj_at_k([None, None], [False, False]) == 0.0
    assert maj_at_k(["7"], [True]) == 1.0
    with pytest.raises(ValueError):
        maj_at_k(["7", "7"], [True, False])  # one answer cannot be both right and wrong
    with pytest.raises(ValueError):
        maj_at_k(["7"], [True], k=2)
