"""OpenAI-RFT-style python graders: grade(sample, item) runs in the sandbox, the float comes back."""

import datetime
import math

import pytest

from rlvr.rewards.graders.python import grade_in_sandbox, python_grader
from rlvr.sandbox import Limits, command

pytestmark = pytest.mark.filterwarnings("ignore:rlvr.sandbox")

EXACT = """
def grade(sample, item):
    print("graders may print")  # goes to stderr, not into the score
    return 1.0 if sample["output_text"].strip() == item["answer"] else 0.0
"""
FAST = Limits(cpu_seconds=1, wall_seconds=2)


def test_scores_each_completion():
    reward = python_grader(EXACT)
    completions = ["4", " 5 ", [{"role": "assistant", "content": "4"}]]
    assert reward(prompts=["p"] * 3, completions=completions, completion_ids=[[]] * 3,
                  answer=["4", "4", "4"]) == [1.0, 0.0, 1.0]


def test_item_holds_the_row():
    source = "def grade(sample, item):\n    return item['weight'] * len(item['tags'])\n"
    reward = python_grader(source)
    assert reward(completions=["x"], weight=[0.25], tags=[["a", "b"]]) == [0.5]


def test_int_score_is_a_float():
    assert python_grader("def grade(sample, item):\n    return 1\n")(completions=["x"]) == [1.0]


def test_exception_scores_zero():
    score, reason = grade_in_sandbox("def grade(sample, item):\n    return item['missing']\n", "x", {})
    assert score == 0.0 and "KeyError" in reason


def test_timeout_scores_zero():
    score, reason = grade_in_sandbox("def grade(sample, item):\n    while True:\n        pass\n",
                                     "x", {}, FAST)
    assert score == 0.0 and "timeout" in reason


@pytest.mark.parametrize("value", ["True", "'1.0'", "float('nan')", "None", "[1.0]"])
def test_non_number_scores_zero(value):
    score, reason = grade_in_sandbox(f"def grade(sample, item):\n    return {value}\n", "x", {})
    assert score == 0.0 and "not a finite number" in reason


def test_exit_without_score():
    # The grader runs in its own process: os._exit ends that one, not the trainer.
    score, reason = grade_in_sandbox("import os\ndef grade(sample, item):\n    os._exit(0)\n", "x", {})
    assert score == 0.0 and "no score" in reason


def test_sandbox_failure_is_none(monkeypatch):
    monkeypatch.setattr(command, "sandbox_command", lambda *args: (["/nonexistent/bwrap"], True))
    assert python_grader(EXACT)(completions=["4"], answer=["4"]) == [None]


def test_not_json_serialisable_item_values_become_strings():
    source = "def grade(sample, item):\n    return float(item['when'] == '2024-01-01')\n"
    score, _ = grade_in_sandbox(source, "x", {"when": datetime.date(2024, 1, 1)})
    assert math.isclose(score, 1.0)
