"""The multi grader and its calculate_output formula, including formulas that try to run code."""

import pytest

from rlvr.errors import UserError
from rlvr.rewards import GradeResult
from rlvr.rewards.graders import Formula, build_grader

from .conftest import grade

NAMES = ["accuracy", "format"]


def multi(formula, **graders):
    subs = graders or {"accuracy": {"type": "math"}, "format": {"type": "format", "format": "think_answer"}}
    return build_grader({"type": "multi", "name": "total", "graders": subs, "calculate_output": formula})


def test_weighted_sum_by_hand():
    grader = multi("0.9 * accuracy + 0.1 * format")
    completions = [
        "<think>2+2</think><answer>4</answer>",  # right, formatted: 0.9 + 0.1
        "<think>2+2</think><answer>5</answer>",  # wrong, formatted: 0.1
        r"\boxed{4}",  # right, no think block: 0.9
    ]
    results = grade(grader, completions, [{"answer": "4"}] * 3)
    assert [r.reward for r in results] == pytest.approx([1.0, 0.1, 0.9])
    assert results[1].reason == "accuracy=0, format=1"


def test_functions_unary_minus_and_brackets():
    f = Formula.parse("max(accuracy, format) - abs(-0.5) * (accuracy + 1) / 2 + min(1, 2, 3)", NAMES, "g")
    # max(1, 0) - 0.5 * 2 / 2 + 1 = 1.5
    assert f.evaluate({"accuracy": 1.0, "format": 0.0}) == 1.5


def test_list_form_of_graders():
    spec = {
        "type": "multi",
        "graders": [{"name": "a", "type": "math"}, {"name": "b", "type": "format"}],
        "calculate_output": "a * b",
    }
    assert grade(build_grader(spec), [r"\boxed{3}"], [{"answer": "3"}])[0].reward == 1.0


def test_none_from_a_sub_grader_makes_the_row_none():
    result = grade(multi("accuracy + format"), [r"\boxed{3}"], [{"question": "no answer column"}])[0]
    assert result == GradeResult(None, "accuracy not scored: the row has no 'answer'")


def test_division_by_zero_is_none():
    result = grade(multi("accuracy / format"), [r"\boxed{3}"], [{"answer": "3"}])[0]
    assert result.reward is None and "divides by zero" in result.reason


def test_only_sub_graders_in_the_formula_run():
    grader = multi("accuracy", accuracy={"type": "math"}, judge={"type": "countdown"})
    assert grader.formula.names == ("accuracy",)
    assert grade(grader, [r"\boxed{3}"], [{"answer": "3"}])[0] == GradeResult(1.0, "accuracy=1")


@pytest.mark.parametrize(
    "formula, message",
    [
        ("__import__('os').system('x')", "may only call min, max, abs"),
        ("accuracy.__class__", "'accuracy.__class__', which is not allowed"),
        ("format.__globals__['os']", "which is not allowed"),
        ("accuracy ** 1000000", "'accuracy ** 1000000', which is not allowed"),
        ("open('/etc/passwd')", "may only call min, max, abs"),
        ("(lambda: 1)()", "may only call min, max, abs"),
        ("[x for x in accuracy]", "which is not allowed"),
        ("max(*accuracy)", "with plain arguments"),
        ("max(accuracy, key=format)", "with plain arguments"),
        ("abs(accuracy, format)", "with plain arguments"),
        ("accuracy if format else 0", "which is not allowed"),
        ("'a' + accuracy", "only numbers and grader names"),
        ("True * accuracy", "only numbers and grader names"),
        ("acuracy + format", "'acuracy', which is not a sub-grader; did you mean 'accuracy'?"),
        ("eval", "'eval', which is not a sub-grader"),
        ("accuracy +", "is not a formula"),
        ("accuracy; import os", "is not a formula"),
        ("1" + " + 1" * 600, "over 1000 characters"),
    ],
)
def test_formulas_outside_the_allow_list_are_refused(formula, message):
    with pytest.raises(UserError) as error:
        multi(formula)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_deeply_nested_formula_is_refused_not_crashed():
    with pytest.raises(UserError, match="nested too deeply|over 1000 characters|is not a formula"):
        Formula.parse("-" * 990 + "accuracy", NAMES, "g")


@pytest.mark.parametrize(
    "graders, message",
    [
        ({}, "field 'graders' must map names"),
        ({"my-grader": {"type": "math"}}, "cannot be used in calculate_output"),
        ({"if": {"type": "math"}}, "cannot be used in calculate_output"),
        ({"a": "math"}, "sub-grader 'a' is a str"),
    ],
)
def test_bad_sub_grader_lists(graders, message):
    with pytest.raises(UserError, match=message):
        build_grader({"type": "multi", "graders": graders, "calculate_output": "1"})


def test_duplicate_names_in_list_form():
    spec = {"type": "multi", "graders": [{"name": "a", "type": "math"}] * 2, "calculate_output": "a"}
    with pytest.raises(UserError, match="share a name"):
        build_grader(spec)
