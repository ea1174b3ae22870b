"""Language consistency: the share of letters in the target script, maths and code ignored."""

import pytest

from rlvr.errors import UserError
from rlvr.rewards.language import language_consistency, script_of, script_share

LATIN = frozenset({"latin"})


@pytest.mark.parametrize(
    ("char", "script"),
    [
        ("a", "latin"), ("É", "latin"), ("Ａ", "latin"), ("中", "han"), ("の", "hiragana"), ("ア", "katakana"),
        ("ｱ", "katakana"), ("한", "hangul"), ("я", "cyrillic"), ("ب", "arabic"), ("λ", "greek"), ("7", None),
        ("+", None),
    ],
)
def test_script_of_a_character(char, script):
    assert script_of(char) == script


def test_share_counts_letters_only():
    assert script_share("abc 中文", LATIN) == pytest.approx(3 / 5)
    assert script_share("1 + 2 = 3 !", LATIN) is None


@pytest.mark.parametrize(
    "ignored",
    [
        r"$\frac{\alpha}{\beta}$", r"$$x^2 + y^2$$", r"\(a+b\)", r"\[\sum_i x_i\]", r"\sqrt{2}",
        "`print(x)`", "```python\ndef f(x):\n    return x\n```", "<think>", "</answer>",
    ],
)
def test_maths_code_and_tags_are_ignored(ignored):
    # Chinese text with Latin-looking maths or code: only the Chinese counts.
    assert script_share(f"所以 {ignored} 答案", frozenset({"han"})) == 1.0


def test_reads_the_chain_of_thought_by_default():
    completion = "<think>我们来算一下</think><answer>The answer is 4</answer>"
    assert language_consistency([completion]) == [0.0]
    assert language_consistency([completion], scope="all")[0] == pytest.approx(11 / 17)  # "The answer is"
    assert language_consistency(["<think>first</think> <think>second 第二</think>"]) == [pytest.approx(11 / 13)]
    assert language_consistency(["<think>truncated in the middle 中"]) == [pytest.approx(20 / 21)]


def test_whole_completion_when_there_is_no_think_block():
    assert language_consistency(["Plain English, 中"]) == [pytest.approx(12 / 13)]


def test_target_from_language_script_or_a_column():
    text = "<think>日本語のテスト</think>"
    assert language_consistency([text], language="ja") == [1.0]
    assert language_consistency([text], language="zh") == [pytest.approx(3 / 7)]
    assert language_consistency([text], script="hiragana") == [pytest.approx(1 / 7)]
    assert language_consistency(["hello", "привет"], language=["en", "ru"]) == [1.0, 1.0]
    assert language_consistency(["hello"], language="en-US") == [1.0]


def test_no_letters_is_not_scored():
    assert language_consistency(["<think>2+2=4</think>", ""]) == [None, None]


def test_chat_message_completions():
    assert language_consistency([[{"role": "assistant", "content": "<think>ok</think>"}]]) == [1.0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"language": "klingon"}, "unknown language"), ({"script": "latn"}, "did you mean 'latin'"),
     ({"scope": "answer"}, "scope 'answer' is unknown")],
)
def test_bad_settings_are_user_errors(kwargs, message):
    with pytest.raises(UserError, match=message):
        language_consistency(["x"], **kwargs)
