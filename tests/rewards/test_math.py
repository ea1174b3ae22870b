"""Maths answer extraction, equivalence and the accuracy rewards, with hand-written answers."""

import pytest

from rlvr.errors import UserError
from rlvr.rewards.math import (
    answers_match,
    boxed_contents,
    extract_answer,
    gold_answer,
    is_hedged,
    math_accuracy,
    math_accuracy_lenient,
    normalize_number,
)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


# --- extraction -------------------------------------------------------------------------------


def test_nested_braces_stay_inside_the_box():
    assert extract_answer(r"so the answer is \boxed{\frac{1}{2}}.") == r"\frac{1}{2}"
    assert boxed_contents(r"\boxed{\{1, 2\}}") == [r"\{1, 2\}"]


def test_last_box_wins():
    assert extract_answer(r"first \boxed{3}, on reflection \boxed{5}") == "5"


def test_fbox_and_space_forms():
    assert extract_answer(r"\fbox{12}") == "12"
    assert extract_answer(r"$\boxed 5$") == "5"


def test_box_inside_box_is_listed_once():
    assert boxed_contents(r"\boxed{\boxed{7}}") == [r"\boxed{7}"]


def test_unclosed_box_is_ignored():
    assert boxed_contents(r"\boxed{12") == []
    assert extract_answer(r"\boxed{12") is None


def test_boxedx_is_not_a_box():
    assert boxed_contents(r"\boxedfoo 3") == []


def test_answer_tag_when_no_box():
    assert extract_answer("<think>1+1</think>\n<answer> 2 </answer>") == "2"
    assert extract_answer("<answer>1</answer> <answer>3</answer>") == "3"


def test_box_takes_priority_over_answer_tag():
    assert extract_answer(r"<answer>\boxed{4} (four)</answer>") == "4"


def test_strict_ignores_a_bare_last_number_that_lenient_finds():
    text = "Adding them gives 42"
    assert extract_answer(text) is None
    assert extract_answer(text, mode="lenient") == "42"


def test_lenient_fallbacks_in_order():
    assert extract_answer("3 + 4 = 7\n#### 7", mode="lenient") == "7"
    assert extract_answer("So the answer is 12 apples. Then 3", mode="lenient") == "12"
    assert extract_answer("Final answer: 1/4", mode="lenient") == "1/4"
    assert extract_answer(r"The answer is $\frac{1}{2}$, done", mode="lenient") == r"\frac{1}{2}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("we get 5-3 = 2", "2"),
        ("x = -3", "-3"),
        ("the total is 1,234 apples", "1,234"),
        ("about 2.75 litres", "2.75"),
        ("3/4 of the cake", "3/4"),
        ("no numbers here", None),
    ],
)
def test_lenient_last_number(text, expected):
    assert extract_answer(text, mode="lenient") == expected


def test_unknown_mode_is_a_user_error():
    with pytest.raises(UserError, match="lenient"):
        extract_answer("x", mode="loose")


# --- numbers and equivalence --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("7", 7.0),
        ("07", 7.0),
        ("7.00", 7.0),
        ("-2.5", -2.5),
        ("1,000", 1000.0),
        ("3/4", 0.75),
        (r"\frac{1}{2}", 0.5),
        (r"-\dfrac{3}{4}", -0.75),
        (r"\frac12", 0.5),
        (r"50\%", 50.0),
        (r"$\text{12}$.", 12.0),
        ("x+1", None),
        ("1/0", None),
        ("inf", None),
        ("1e5", None),
    ],
)
def test_normalize_number(text, value):
    assert normalize_number(text) == value


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("7.0", "7"),
        ("07", "7"),
        ("7.00", "7"),
        ("1,000", "1000"),
        ("1/2", "0.5"),
        (r"\frac{1}{2}", "0.5"),
        (r"50\%", "50"),
        ("$12$", "12"),
        (r"\text{Monday}", "Monday"),
        ("x + 1", "x+1"),
        (r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}"),  # only math-verify sees this one
    ],
)
def test_equivalent_answers_match(pred, gold):
    assert answers_match(pred, gold)


@pytest.mark.parametrize(("pred", "gold"), [("8", "7"), ("0.5", "0.25"), ("Tuesday", "Monday"), ("", "7")])
def test_different_answers_do_not_match(pred, gold):
    assert not answers_match(pred, gold)


def test_relative_tolerance():
    assert answers_match("0.3333333", "1/3", rel_tol=1e-6)
    assert not answers_match("0.333", "1/3", rel_tol=1e-6)


# --- gold answers and hedging ---------------------------------------------------------------


def test_gold_answer_forms():
    assert gold_answer("Natalia sold 48 clips, then 24.\n#### 72") == "72"
    assert gold_answer(r"so \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert gold_answer(72) == "72"
    assert gold_answer("") is None
    assert gold_answer("#### ") is None
    assert gold_answer(None) is None
    assert gold_answer(float("nan")) is None


def test_hedging_needs_two_different_answers():
    assert is_hedged(r"\boxed{3} ... \boxed{4}")
    assert not is_hedged(r"\boxed{3} ... so again \boxed{3.0}")
    assert not is_hedged(r"\boxed{3}")


# --- reward functions ---------------------------------------------------------------------


def test_math_accuracy_scores():
    completions = [
        r"Half of it: \boxed{\frac{1}{2}}",
        r"\boxed{3} or maybe \boxed{4}",
        r"\boxed{7.0}",
        r"\boxed{1,000}",
        r"\boxed{8}",
        "so it is 72",
    ]
    answers = ["0.5", "3", "7", "1000", "7", "72"]
    assert math_accuracy(completions, answer=answers) == [1.0, 0.0, 1.0, 1.0, 0.0, 0.0]


def test_gsm8k_gold_answers():
    gold = "She sold 48/2 = 24 clips in May.\n#### 72"
    assert math_accuracy([r"\boxed{72}", r"\boxed{24}"], answer=[gold, gold]) == [1.0, 0.0]


def test_empty_gold_answer_is_not_applicable():
    assert math_accuracy([r"\boxed{1}", r"\boxed{1}"], answer=["", "1"]) == [None, 1.0]


def test_chat_message_completions():
    completions = [chat(r"\boxed{72}"), chat("It is 72")]
    assert math_accuracy(completions, answer=["72", "72"]) == [1.0, 0.0]
    assert math_accuracy_lenient(completions, answer=["72", "72"]) == [1.0, 1.0]


def test_lenient_reward_finds_the_last_number_and_still_refuses_hedging():
    completions = ["so it is 72", "The answer is 8.", r"\boxed{72} or \boxed{73}"]
    assert math_accuracy_lenient(completions, answer=["72", "7", "72"]) == [1.0, 0.0, 0.0]


def test_reward_accepts_trl_keywords_and_extra_columns():
    scores = math_accuracy(
        prompts=["What is 6*12?"],
        completions=[r"\boxed{72}"],
        completion_ids=[[1, 2, 3]],
        answer=["72"],
        difficulty=["easy"],
    )
    assert scores == [1.0]


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError):
        math_accuracy([r"\boxed{1}"], answer=["1", "2"])


def test_an_unevaluated_expression_is_not_an_answer():
    """Regression: the default job's policy learned to box the question ("\\boxed{7 + 5}"), which a
    CAS-backed check simplified to 12 and paid in full. A numeric gold needs a numeric answer."""
    completions = [r"\boxed{7 + 5}", r"\boxed{5 + 7}", r"\boxed{7 + 5 = 12}", r"\boxed{12}", r"\boxed{x = 12}",
                   r"\boxed{6 \cdot 2}"]
    assert math_accuracy(completions, answer=["12"] * 6) == [0.0, 0.0, 1.0, 1.0, 1.0, 0.0]
