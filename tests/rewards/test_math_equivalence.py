r"""Maths equivalence, one table checked two ways: `answers_match` in-process and `math_accuracy`
through the worker pool (their verdicts must agree), then hostile answers under the time bound.

The false matches are math-verify's own: alone it says 1/2004! = 1/2006! and 10^{-20} = 10^{-21}
(absolute tolerance), so each row here is a regression test for the relative re-check.
"""

import threading
import time

import pytest

from rlvr.rewards import symbolic, workers
from rlvr.rewards.math import answers_match, math_accuracy, quick_match

MATCHES = [
    # fractions and decimals
    (r"\frac{1}{2}", "0.5"),
    ("0.5", r"\frac{1}{2}"),
    (r"\dfrac{3}{4}", "0.75"),
    ("-3/4", r"-\frac{3}{4}"),
    # percentages: with the sign on one side only, x% equals x and x/100 (as in math-verify)
    (r"50\%", "50"),
    (r"50\%", "0.5"),
    ("0.5", r"50\%"),
    (r"12.5\%", r"\frac{1}{8}"),
    # LaTeX forms
    (r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}"),
    (r"\frac{\sqrt2}{2}", r"\frac{1}{\sqrt{2}}"),
    ("(x+1)^2", "x^2+2x+1"),
    (r"\left( 1, 2 \right)", "(1,2)"),
    # intervals and sets
    ("[1, 2)", "[1,2)"),
    (r"\{1, 2\}", r"\{2, 1\}"),
    # units, currency, separators, leading zeros
    (r"5 \text{ cm}", "5"),
    (r"5\,\text{cm}^2", "5"),
    ("10 dollars", "10"),
    (r"\$1,000", "1000"),
    ("025", "25"),
    # tolerance: relative 1e-6 once a decimal is involved
    ("0.3333333", "1/3"),
    ("7.0000001", "7"),
    # an equation naming the asked-for variable
    ("x = 2", "2"),
]

DIFFERENT = [
    # math-verify's false matches: tiny numbers that differ, and look-alike equations
    ("1/2004!", "1/2006!"),
    (r"\frac{1}{2004!}", r"\frac{1}{2006!}"),
    (r"\frac{1}{20!}", r"\frac{1}{21!}"),
    ("10^{-20}", "10^{-21}"),
    ("4", r"4\sqrt{2}"),
    ("x = 2", "y = 3"),
    ("a+b=5", "a+b=6"),
    ("x = 2", "x = 3"),
    # exact integers: no tolerance (rel 1e-6 would make these equal)
    ("1000001", "1000000"),
    ("0.333", "1/3"),
    # percentages on both sides compare as written
    (r"5\%", r"0.5\%"),
    (r"50\%", "0.05"),
    # intervals, sets, and a number times pi is not a unit
    ("[1,2]", "[1,2)"),
    (r"\{1,2\}", r"\{1,3\}"),
    ("2 pi", "2"),
    ("8", "7"),
]


def via_reward(pred: str, gold: str) -> bool:
    """The verdict of the maths reward, which sends the symbolic step to the worker pool."""
    score = math_accuracy([rf"The answer is \boxed{{{pred}}}."], [gold])[0]
    assert score is not None, f"gold {gold!r} unexpectedly unreadable"
    return score == 1.0


@pytest.mark.parametrize("check", [answers_match, via_reward], ids=["in_process", "reward"])
@pytest.mark.parametrize(("pred", "gold"), MATCHES)
def test_equivalent_answers_match(check, pred, gold):
    assert check(pred, gold)


@pytest.mark.parametrize("check", [answers_match, via_reward], ids=["in_process", "reward"])
@pytest.mark.parametrize(("pred", "gold"), DIFFERENT)
def test_different_answers_do_not_match(check, pred, gold):
    assert not check(pred, gold)


def test_cheap_cases_never_reach_math_verify():
    assert quick_match("025", "25") is True
    assert quick_match(r"50\%", "0.5") is True
    assert quick_match("1000001", "1000000") is False
    assert quick_match(r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}") is None  # symbolic step needed


def slow_the_first_call(monkeypatch, module, name):
    """`module.name` made to take 1.5 s the first time it is called, in a process as fresh (nothing set up yet);
    the first argument of each call, listed."""
    real, seen = getattr(module, name), []

    def slow(*args, **kwargs):
        if not seen:
            time.sleep(1.5)
        seen.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, slow)
    monkeypatch.setattr(symbolic, "_warmed_up", False)  # as in a fresh process
    return seen


def test_the_parsers_one_off_set_up_never_times_an_answer_out(monkeypatch):
    """The first comparison in a process sets up math-verify's LaTeX parser, seconds on a loaded machine (the
    suite's `pytest -n 2` once timed out a correct answer's parse that way). It is done once, before any answer's
    alarm starts: here a first parse taking 1.5 s under an answer's 1-second alarm."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("math-verify's alarm works on the main thread only")
    import math_verify.parser

    if not hasattr(math_verify.parser, "extract_target_from_pred"):
        pytest.skip("this math-verify parses through another function (the test slows math-verify 0.9's)")
    parsed = slow_the_first_call(monkeypatch, math_verify.parser, "extract_target_from_pred")  # (under its alarm)
    assert answers_match(r"\{1, 2\}", r"\{2, 1\}", alarm_s=1)
    assert parsed[0] == f"${symbolic.WARM_UP_PAIR[1]}$"  # the set-up parsed its fixed pair (gold first), not an answer
    assert answers_match(r"\{1, 2\}", r"\{2, 1\}", alarm_s=1)


def test_the_first_simplification_is_part_of_the_set_up(monkeypatch):
    """sympy's first simplification of polynomials in a process takes ~0.3 s idle and over 2 s on a loaded machine
    (the suite once timed out ``(x+1)^2`` = ``x^2+2x+1`` that way): the set-up simplifies too, before any answer's
    alarm starts. Here the first `simplify` takes 1.5 s, under an answer's 1-second alarm."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("math-verify's alarm works on the main thread only")
    import math_verify.grader

    calls = slow_the_first_call(monkeypatch, math_verify.grader, "simplify")
    assert answers_match("(y-2)^2", "y^2-4y+4", alarm_s=1)
    assert calls  # the comparison did go through sympy's simplification


@pytest.mark.parametrize("gold", [r"\frac{", "}{", r"\sqrt{"])
def test_unparseable_gold_is_skipped_not_failed(gold):
    assert math_accuracy([r"\boxed{1}", "no answer", r"\boxed{1} \boxed{2}"], [gold] * 3) == [None] * 3


def test_hedging_scores_zero_even_with_the_right_answer_boxed():
    assert math_accuracy([r"\boxed{x+1} or \boxed{x-1}"], ["x+1"]) == [0.0]
    assert math_accuracy([r"\boxed{0.5}, that is \boxed{\frac12}"], ["1/2"]) == [1.0]  # same value twice


def test_a_simple_batch_stays_in_process_and_fast():
    completions = [rf"So the total is \boxed{{{i}}}." for i in range(64)]
    answers = [f"#### {i if i % 2 else i + 1}" for i in range(64)]
    math_accuracy(completions, answers)  # imports and caches warm
    items = workers.stats().items
    scores = math_accuracy(completions, answers)
    assert scores == [float(i % 2) for i in range(64)]
    assert workers.stats().items == items  # no item went to a worker (in-process: ~5 ms for the 64)


# --- hostile answers: each finishes within the bound and scores 0, never hangs or raises -----

BOUND_S = 1.0  # the bound per item in these tests (the default is 2 s)
NESTED_FRACTION = "1"
for _ in range(2000):
    NESTED_FRACTION = rf"\frac{{{NESTED_FRACTION}}}{{2}}"

HOSTILE = {
    "power tower": "9^{9^{9^9}}",
    "2,000 nested brackets": "(" * 2000 + "1" + ")" * 2000,
    "2,000 nested fractions": NESTED_FRACTION,
    "5,000 digits": "9" * 5000,
    "5,000 digits with separators": ",".join(["999"] * 1667),
    "huge factorial": "(10^{10})!",
    "slow expansion": "(x+1)^{999}(x+2)^{999}",  # passes every cheap guard: only the kill stops it
}


def score_in(where: str, completions: list[str], answers: list[str]) -> tuple[list, float]:
    """math_accuracy's scores and wall time, called on the main thread or a fresh thread."""
    # Workers killed by the previous test are restarting: the bound counts from hand-out, not start-up.
    assert workers.start_shared_pool()
    outcome = {}

    def run():
        start = time.perf_counter()
        outcome["scores"] = math_accuracy(completions, answers, timeout_s=BOUND_S)
        outcome["seconds"] = time.perf_counter() - start

    if where == "main":
        run()
    else:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join(timeout=60)
    return outcome["scores"], outcome["seconds"]


@pytest.mark.parametrize("where", ["main", "thread"])
@pytest.mark.parametrize("answer", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_answer_scores_zero_within_the_bound(where, answer):
    scores, seconds = score_in(where, [rf"\boxed{{{answer}}}"], ["(x+3)^{999}"])
    assert scores == [0.0]
    assert seconds < BOUND_S + 1.0


def test_hostile_gold_answer_is_bounded_too():
    scores, seconds = score_in("main", [r"\boxed{1}", r"\boxed{(x+3)^{999}}"], [HOSTILE["slow expansion"]] * 2)
    assert scores == [0.0, 0.0]
    assert seconds < BOUND_S + 1.0


def test_a_long_number_still_matches_itself():
    assert math_accuracy([rf"\boxed{{{'9' * 5000}}}"], ["9" * 5000]) == [1.0]
