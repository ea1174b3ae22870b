"""pass@k against brute-force enumeration; maj@k ties as documented."""

import itertools
import random
from math import comb

import pytest

from rlvr.evaluate import best_of_n, maj_at_k, pass_at_k


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


def _best_of_n_by_enumeration(scores, correct, n):
    """Every n-subset, ties at the top split evenly: the definition, slowly."""
    total = 0.0
    subsets = list(itertools.combinations(range(len(scores)), n))
    for subset in subsets:
        top = max(scores[i] for i in subset)
        tied = [i for i in subset if scores[i] == top]
        total += sum(correct[i] for i in tied) / len(tied)
    return total / len(subsets)


@pytest.mark.parametrize("seed", range(30))
def test_best_of_n_equals_enumeration_with_ties(seed):
    rng = random.Random(seed)
    size = rng.randint(1, 8)
    scores = [float(rng.randint(0, 3)) for _ in range(size)]  # few levels: many ties
    correct = [rng.random() < 0.5 for _ in range(size)]
    for n in range(1, size + 1):
        assert best_of_n(scores, correct, n) == pytest.approx(_best_of_n_by_enumeration(scores, correct, n), abs=1e-12)


def test_best_of_n_extremes_match_mean_and_oracle_ordering():
    scores, correct = [0.3, 0.9, 0.1, 0.7], [True, False, False, True]
    assert best_of_n(scores, correct, 1) == pytest.approx(0.5)  # one draw: mean accuracy
    assert best_of_n(scores, correct, 4) == 0.0  # all drawn: the top-scored (0.9) is wrong
    perfect = [float(c) for c in correct]  # a selector that knows the verdict is the oracle: pass@n
    for n in range(1, 5):
        assert best_of_n(perfect, correct, n) == pytest.approx(pass_at_k(4, 2, n))
    assert best_of_n([float("nan"), 0.0], [True, False], 2) == 0.0  # NaN ranks last
