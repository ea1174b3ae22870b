"""Countdown: exact arithmetic, each number exactly once, and untrusted expressions never run."""

import ast

import pytest

from rlvr.errors import UserError
from rlvr.rewards.countdown import _evaluate, _Rejected, countdown, countdown_expression, evaluate_expression


def score(expression: str, numbers: list[int], target: int) -> float:
    return countdown([f"<answer>{expression}</answer>"], numbers=[numbers], target=[target])[0]


def test_correct_expression():
    assert score("(25 - 5) * 4 + 3", [25, 5, 4, 3], 83) == 1.0


def test_number_order_does_not_matter():
    assert score("3 + 4*25 - 5", [25, 5, 4, 3], 98) == 1.0


def test_fractions_are_exact():
    # 8 / (3 - 8/3) = 8 / (1/3) = 24; floating point gives 23.999999999999996.
    assert score("8/(3-8/3)", [3, 3, 8, 8], 24) == 1.0


def test_number_used_twice():
    assert score("(25 - 5) * 4 + 3 + 3 - 3", [25, 5, 4, 3], 83) == 0.0
    assert score("3*3", [3, 4], 9) == 0.0


def test_number_missing():
    assert score("25 * 4", [25, 5, 4, 3], 100) == 0.0


def test_invented_number():
    assert score("25 * 4 + 5 - 3 + 1", [25, 5, 4, 3], 103) == 0.0


def test_wrong_value():
    assert score("25 + 5 + 4 + 3", [25, 5, 4, 3], 83) == 0.0


def test_division_by_zero():
    assert score("25 / (4 - 4)", [25, 4, 4], 1) == 0.0


def test_unary_minus_is_allowed():
    assert score("-3 + 5", [3, 5], 2) == 1.0


def test_boxed_expression_when_no_answer_tag():
    assert countdown([r"so \boxed{6*4}"], numbers=[[6, 4]], target=[24]) == [1.0]


def test_last_answer_tag_wins():
    text = "<answer>6+4</answer> no wait <answer>6*4</answer>"
    assert countdown([text], numbers=[[6, 4]], target=[24]) == [1.0]


def test_no_answer():
    assert countdown(["6 times 4 is 24"], numbers=[[6, 4]], target=[24]) == [0.0]
    assert countdown_expression("6 times 4") is None


def test_chat_completion_and_string_target():
    completions = [[{"role": "assistant", "content": "<answer>6*4</answer>"}]]
    assert countdown(completions, numbers=[[6, 4]], target=["24"], prompts=["..."]) == [1.0]


def test_malformed_dataset_row_is_a_user_error():
    with pytest.raises(UserError, match="numbers"):
        countdown(["<answer>1</answer>"], numbers=[["one"]], target=[1])
    with pytest.raises(UserError, match="target"):
        countdown(["<answer>1</answer>"], numbers=[[1]], target=["one"])


# --- adversarial: one attack per test; none may run anything ------------------------------------


@pytest.fixture
def no_side_effects(monkeypatch):
    """Fails the test if the expression reaches eval, exec or a shell."""
    import builtins
    import os

    def forbidden(*args, **kwargs):
        raise AssertionError("untrusted expression was executed")

    for name in ("eval", "exec"):
        monkeypatch.setattr(builtins, name, forbidden)
    monkeypatch.setattr(os, "system", forbidden)


def test_import_call_is_rejected(no_side_effects):
    assert score("__import__('os').system('touch /tmp/pwned')", [1], 0) == 0.0


def test_attribute_access_is_rejected(no_side_effects):
    assert score("(1).__class__", [1], 1) == 0.0


def test_function_call_is_rejected(no_side_effects):
    assert score("abs(-24)", [24], 24) == 0.0


@pytest.mark.parametrize("source", ["__import__('os')", "(1).__class__", "abs(-24)", "x", "[1][0]", "True"])
def test_ast_walker_alone_rejects_non_arithmetic(source, no_side_effects):
    # The character filter stops these first; this checks the second line of defence by itself.
    with pytest.raises(_Rejected):
        _evaluate(ast.parse(source, mode="eval").body, [])


def test_exponent_is_rejected():
    assert score("2**3*3", [2, 3, 3], 24) == 0.0
    assert evaluate_expression("9**9**9**9") is None  # would never finish if evaluated


def test_floor_division_is_rejected():
    assert score("49//2", [49, 2], 24) == 0.0


def test_unary_plus_is_rejected():
    assert evaluate_expression("+24") is None


def test_float_literal_is_rejected():
    assert evaluate_expression("12.0*2") is None


def test_underscore_literal_is_rejected():
    assert evaluate_expression("1_000 + 1") is None


def test_overlong_expression_is_rejected():
    expression = "+".join(["1"] * 101)  # 201 characters
    assert evaluate_expression(expression) is None
    assert score(expression, [1] * 101, 101) == 0.0


def test_huge_number_is_rejected():
    assert evaluate_expression("1000001 - 1") is None
    assert evaluate_expression("1000000 - 1") is not None


def test_deep_nesting_is_a_miss_not_a_crash():
    assert evaluate_expression("(" * 99 + "1" + ")" * 99) is not None
    assert evaluate_expression("-" * 199 + "1") is not None


def test_syntax_error_is_a_miss():
    assert evaluate_expression("(1 + 2") is None
    assert evaluate_expression("1 2") is None
    assert evaluate_expression("") is None
