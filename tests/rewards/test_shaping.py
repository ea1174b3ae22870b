"""DAPO's soft overlong penalty, with hand-computed values."""

import pytest

from rlvr.errors import UserError
from rlvr.rewards.shaping import overlong_penalty


def penalty(lengths, max_tokens=100, cache_tokens=20):
    ids = [[7] * n for n in lengths]
    return overlong_penalty(["x"] * len(ids), ids, max_tokens=max_tokens, cache_tokens=cache_tokens)


def test_zero_up_to_the_start_of_the_ramp():
    assert penalty([0, 1, 50, 80]) == [0.0, 0.0, 0.0, 0.0]


def test_linear_down_to_minus_one_at_the_limit():
    # ((L_max - L_cache) - |y|) / L_cache with L_max = 100, L_cache = 20
    assert penalty([81, 85, 90, 99, 100]) == pytest.approx([-0.05, -0.25, -0.5, -0.95, -1.0])


def test_minus_one_beyond_the_limit():
    assert penalty([101, 500]) == [-1.0, -1.0]


def test_no_ramp_is_a_hard_cut_at_the_limit():
    assert penalty([99, 100, 101], cache_tokens=0) == [0.0, 0.0, -1.0]


def test_slow_reference_agrees_on_every_length():
    def reference(n, l_max=100, l_cache=20):
        if n <= l_max - l_cache:
            return 0.0
        return ((l_max - l_cache) - n) / l_cache if n <= l_max else -1.0

    lengths = list(range(130))
    assert penalty(lengths) == pytest.approx([reference(n) for n in lengths])


def test_missing_parameters_say_how_to_set_them():
    with pytest.raises(UserError, match="needs max_tokens and cache_tokens"):
        overlong_penalty(["x"], [[1]])


@pytest.mark.parametrize(("max_tokens", "cache_tokens"), [(10, 11), (10, -1), (10.5, 2)])
def test_inconsistent_parameters_are_refused(max_tokens, cache_tokens):
    with pytest.raises(UserError, match="0 <= cache_tokens <= max_tokens"):
        penalty([5], max_tokens=max_tokens, cache_tokens=cache_tokens)
