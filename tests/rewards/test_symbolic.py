"""math-verify guards: an answer that would make sympy compute for minutes scores quickly as no match.

Each adversarial input is its own test, and each must finish well inside the timeout below
(without the guard, the first ones take minutes).
"""

import threading
import time

import pytest

from rlvr.rewards.symbolic import MAX_CHARS, equivalent, is_expensive

FAST_S = 1.0


@pytest.mark.parametrize(
    "answer",
    [
        "9^{9^9}",  # power tower
        "9^(9^9)",
        "{{9^{99}}^{99}}^{99}",  # stacked powers
        "9^{999}^{999}",
        "10^{100000000}",  # huge exponent
        "9**9**9",  # Python spelling
        "(10^{10})!",  # factorial of a huge number
        "(99!)!",
        r"\binom{10^{100}}{10^{50}}",
        r"\Gamma(10^{100})",
    ],
)
def test_expensive_answers_are_refused_quickly(answer):
    assert is_expensive(answer)
    start = time.perf_counter()
    assert not equivalent(answer, "1")
    assert not equivalent("1", answer)
    assert time.perf_counter() - start < FAST_S


@pytest.mark.parametrize("answer", ["x^2+2x+1", "2^{10}", "e^{x}", "5!", r"\binom{5}{2}", r"\sqrt{2}/2"])
def test_ordinary_answers_are_not_refused(answer):
    assert not is_expensive(answer)


@pytest.mark.parametrize(
    ("pred", "gold"),
    [("(x+1)^2", "x^2+2x+1"), ("5!", "120"), (r"\binom{5}{2}", "10"), (r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}")],
)
def test_math_verify_equivalences(pred, gold):
    assert equivalent(pred, gold)


def test_long_inputs_are_not_compared():
    long_sum = "+".join(["1"] * (MAX_CHARS // 2 + 1))  # over MAX_CHARS characters
    assert not equivalent(long_sum, str(MAX_CHARS // 2 + 1))


def test_garbage_is_a_miss_not_an_exception():
    assert not equivalent(r"\frac{", "1")
    assert not equivalent("}}}{{{", "1")


def test_works_off_the_main_thread():
    # math-verify's signal.alarm timeouts raise ValueError outside the main thread.
    results = []
    worker = threading.Thread(target=lambda: results.append(equivalent("(x+1)^2", "x^2+2x+1")))
    worker.start()
    worker.join()
    assert results == [True]
