"""Format rewards: shape of the completion only, with hand-written cases."""

import pytest

from rlvr.rewards.format import boxed_format, soft_think_answer_format, think_answer_format


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so \boxed{42}", 1.0),
        (r"\boxed{\frac{1}{2}}", 1.0),
        (r"\boxed{anything at all}", 1.0),
        (r"\boxed{3} or \boxed{3}", 0.0),  # two boxes, even if equal
        (r"\boxed{}", 0.0),
        (r"\boxed{  }", 0.0),
        ("42", 0.0),
        (r"\boxed{unclosed", 0.0),
    ],
)
def test_boxed_format(text, expected):
    assert boxed_format([text]) == [expected]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>2+2=4</think><answer>4</answer>", 1.0),
        ("  <think>\nmulti\nline\n</think>\n\n<answer>4</answer>\n", 1.0),
        ("<think>a</think> <answer>4</answer> and more", 0.0),  # text after the answer
        ("preamble <think>a</think><answer>4</answer>", 0.0),  # text before the think block
        ("<answer>4</answer><think>a</think>", 0.0),  # wrong order
        ("<think>a</think>", 0.0),
        ("<answer>4</answer>", 0.0),
        ("<think>a</think><answer>4</answer><answer>5</answer>", 0.0),  # two answers
        ("<think>a<think>b</think><answer>4</answer>", 0.0),  # nested think
        ("", 0.0),
    ],
)
def test_think_answer_format(text, expected):
    assert think_answer_format([text]) == [expected]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>a</think><answer>4</answer>", 1.0),
        ("a</think><answer>4</answer>", 0.75),  # the prompt opened <think>
        ("<think>a</think>", 0.5),
        ("<answer>4</answer>", 0.5),
        ("<answer>4</answer><think>a</think>", 0.5),  # the answer tags come too early to count
        ("</answer><answer></think><think>", 0.25),
        ("4", 0.0),
    ],
)
def test_soft_think_answer_format(text, expected):
    assert soft_think_answer_format([text]) == [expected]


def test_chat_messages_and_trl_keywords():
    completions = [
        [{"role": "assistant", "content": r"<think>x</think><answer>\boxed{4}</answer>"}],
        [{"role": "assistant", "content": "4"}],
    ]
    keywords = {"prompts": [[{"role": "user", "content": "2+2?"}]] * 2, "completion_ids": [[1], [2]]}
    assert boxed_format(completions, **keywords, answer=["4", "4"]) == [1.0, 0.0]
    assert think_answer_format(completions, **keywords) == [1.0, 0.0]
    assert soft_think_answer_format(completions, **keywords) == [1.0, 0.0]
