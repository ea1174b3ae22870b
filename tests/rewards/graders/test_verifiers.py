"""The built-in verifiers as grader types: math, countdown, format (code and python if installed)."""

import pytest

from rlvr.errors import UserError
from rlvr.rewards import GradeResult
from rlvr.rewards.graders import build_grader

from .conftest import grade


def test_math_rewards_and_reasons():
    results = grade(
        {"type": "math"},
        [r"so \boxed{72}", r"\boxed{71}", "it is 72", r"\boxed{3} or \boxed{4}", r"\boxed{1}", r"\boxed{1}"],
        [{"answer": "#### 72"}, {"answer": "72"}, {"answer": "72"}, {"answer": "3"}, {"answer": ""}, {"q": 1}],
    )
    assert results == [
        GradeResult(1.0, "answer '72' matches"),
        GradeResult(0.0, "answer '71' != expected '72'"),
        GradeResult(0.0, r"no final answer (strict mode reads \boxed{} or <answer>)"),
        GradeResult(0.0, "boxes several different answers"),
        GradeResult(None, "the row's 'answer' is empty"),
        GradeResult(None, "the row has no 'answer'"),
    ]


def test_math_lenient_mode():
    results = grade({"type": "math", "mode": "lenient"}, ["it is 72", "nothing"], [{"answer": 72}] * 2)
    assert [r.reward for r in results] == [1.0, 0.0]
    assert results[1].reason == "no final answer (lenient mode reads any answer)"


def test_countdown_rewards_and_reasons():
    item = {"numbers": [3, 3, 8, 8], "target": 24}
    results = grade(
        {"type": "countdown"},
        ["<answer>8/(3-8/3)</answer>", "<answer>8*3</answer>", "<answer>8+8+3+3</answer>",
         "<answer>__import__('os')</answer>", "24"],
        [item] * 5,
    )
    assert results == [
        GradeResult(1.0, "'8/(3-8/3)' = 24"),
        GradeResult(0.0, "uses [3, 8], not each of [3, 3, 8, 8] once"),
        GradeResult(0.0, "'8+8+3+3' = 22, not 24"),
        GradeResult(0.0, "\"__import__('os')\" is not arithmetic on integers"),
        GradeResult(0.0, "no <answer> expression"),
    ]


def test_countdown_bad_row_is_not_scored_and_others_are():
    results = grade(
        {"type": "countdown"},
        ["<answer>2*3</answer>", "<answer>2*3</answer>", "<answer>2*3</answer>"],
        [{"numbers": ["two", 3], "target": 6}, {"numbers": [2, 3]}, {"numbers": [2, 3], "target": 6}],
    )
    assert results[0].reward is None and "must be a list of integers" in results[0].reason
    assert results[1] == GradeResult(None, "the row has no 'target'")
    assert results[2].reward == 1.0


@pytest.mark.parametrize(
    "fmt, expected",
    [("boxed", [1.0, 0.0, 0.0]), ("think_answer", [0.0, 1.0, 0.0]), ("soft_think_answer", [0.0, 1.0, 0.5])],
)
def test_format_options(fmt, expected):
    completions = [r"\boxed{4}", "<think>a</think><answer>4</answer>", "<think>a</think> 4"]  # soft: 2 of 4 tags
    assert [r.reward for r in grade({"type": "format", "format": fmt}, completions, [{}] * 3)] == expected


def test_format_default_is_boxed_and_bad_option_is_named():
    default = grade({"type": "format"}, [r"\boxed{4}", "<think>a</think><answer>4</answer>"], [{}, {}])
    assert [r.reward for r in default] == [1.0, 0.0] and default[0].reason == "boxed format: 1"
    with pytest.raises(UserError, match="field 'format' is 'think_anwser'; did you mean 'think_answer'"):
        build_grader({"type": "format", "format": "think_anwser"})


def test_math_bad_mode():
    with pytest.raises(UserError, match="field 'mode' is 'strictly'"):
        build_grader({"type": "math", "mode": "strictly"})


def test_code_grader_with_tests_and_entry_point():
    pytest.importorskip("rlvr.rewards.code")
    grader = build_grader({"type": "code"})
    completion = "```python\ndef add(a, b):\n    return a + b\n```"
    stdin_program = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    results = grade(grader,
        [completion, stdin_program, completion],
        [
            {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "entry_point": "add"},
            {"tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "2 2\n", "output": "4\n"}]},
            {"question": "no tests"},
        ],
    )
    assert [r.reward for r in results] == [1.0, 1.0, None]


def test_python_grader_runs_the_users_grade_function():
    pytest.importorskip("rlvr.rewards.graders.python")
    source = (
        "def grade(sample, item):\n"
        "    return 1.0 if sample['output_text'].strip() == item['answer'] else 0.0\n"
    )
    results = grade(build_grader({"type": "python", "source": source}), ["4", "5"], [{"answer": "4"}] * 2)
    assert [r.reward for r in results] == [1.0, 0.0]


def test_code_grader_malformed_row_loses_only_that_row():
    pytest.importorskip("rlvr.rewards.code")
    completion = "```python\ndef add(a, b):\n    return a + b\n```"
    check = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 5\n"
    results = grade(build_grader({"type": "code"}),
        [completion, completion, completion],
        [{"test": check, "entry_point": "add"}, {"test": check}, {"tests": "not a list"}],
    )
    assert results[0] == GradeResult(0.5, "tests (fraction): 0.5")  # one assertion of two passes
    assert results[1].reward is None and "entry_point" in results[1].reason
    assert results[2].reward is None and "tests" in results[2].reason


def test_code_grader_mode_all_and_bad_mode():
    pytest.importorskip("rlvr.rewards.code")
    completion = "```python\nprint(int(input()) * 2)\n```"
    tests = [{"input": "2\n", "output": "4\n"}, {"input": "3\n", "output": "7\n"}]
    assert grade(build_grader({"type": "code"}), [completion], [{"tests": tests}])[0].reward == 0.5
    assert grade(build_grader({"type": "code", "mode": "all"}), [completion], [{"tests": tests}])[0].reward == 0.0
    with pytest.raises(UserError, match="field 'mode' is 'most'"):
        build_grader({"type": "code", "mode": "most"})


def test_python_grader_reasons_say_what_happened():
    pytest.importorskip("rlvr.rewards.graders.python")
    from rlvr.rewards.graders import load_grader

    source = "def grade(sample, item):\n    return 1.0 if sample['output_text'] == item['answer'] else 1 / 0\n"
    results = grade(load_grader({"type": "python", "source": source}), ["7", "8"], [{"answer": "7"}, {"answer": "7"}])
    assert [r.reward for r in results] == [1.0, 0.0]
    assert "ZeroDivisionError" in results[1].reason
