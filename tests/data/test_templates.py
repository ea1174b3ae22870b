"""render_prompt: plain, r1_zero, custom and chat templates, with an offline tiny tokenizer."""

import pytest

from rlvr.data import render_prompt
from rlvr.data.templates import TEMPLATES
from rlvr.errors import UserError

QUESTION = "What is 2 + 3? Put your final answer in \\boxed{}."
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tiny_tokenizer(chat_template: str | None):
    """A word-level tokenizer built in memory: no download, no files."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "hi": 1}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    tokenizer.chat_template = chat_template
    return tokenizer


@pytest.fixture(scope="module")
def chat_tokenizer():
    return tiny_tokenizer(CHAT_TEMPLATE)


def test_builtin_names():
    assert TEMPLATES == ("chat", "plain", "r1_zero")


def test_plain_is_the_prompt_text():
    assert render_prompt(QUESTION, template="plain") == QUESTION
    messages = [{"role": "user", "content": "first"}, {"role": "user", "content": "second"}]
    assert render_prompt(messages, template="plain") == "first\n\nsecond"
    assert render_prompt("q", template="plain", system_prompt="sys") == "sys\n\nq"


def test_r1_zero_is_the_paper_template_around_the_prompt():
    text = render_prompt("Compute 2 + 3", template="r1_zero")
    assert text == (
        "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
        "The assistant first thinks about the reasoning process in the mind and then provides the user "
        "with the answer. The reasoning process and answer are enclosed within <think> </think> and "
        "<answer> </answer> tags, respectively, i.e., <think> reasoning process here </think> "
        "<answer> answer here </answer>. User: Compute 2 + 3. Assistant:"
    )


def test_r1_zero_keeps_the_prompts_own_final_punctuation():
    text = render_prompt(QUESTION, template="r1_zero")
    assert f"User: {QUESTION} Assistant:" in text and ".." not in text
    assert "<think>" in text and "</answer>" in text and text.endswith("Assistant:")


def test_custom_template_keeps_other_braces():
    assert render_prompt("2 + 3", template="Q: {prompt} in \\boxed{}\nA:") == "Q: 2 + 3 in \\boxed{}\nA:"


def test_unknown_template_lists_the_choices():
    with pytest.raises(UserError, match=r"unknown template 'r1'; use one of chat, plain, r1_zero, or a custom"):
        render_prompt("q", template="r1")


def test_chat_wraps_text_as_a_user_message(chat_tokenizer):
    assert render_prompt("hi there", template="chat", tokenizer=chat_tokenizer) == "<|user|>hi there\n<|assistant|>"


def test_chat_prepends_the_system_prompt(chat_tokenizer):
    text = render_prompt("hi", template="chat", tokenizer=chat_tokenizer, system_prompt="Be brief.")
    assert text == "<|system|>Be brief.\n<|user|>hi\n<|assistant|>"


def test_chat_passes_messages_through(chat_tokenizer):
    messages = [
        {"role": "user", "content": "1 + 1?"},
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": "2 + 2?"},
    ]
    text = render_prompt(messages, template="chat", tokenizer=chat_tokenizer)
    assert text == "<|user|>1 + 1?\n<|assistant|>2\n<|user|>2 + 2?\n<|assistant|>"


def test_two_system_prompts_are_a_user_error(chat_tokenizer):
    messages = [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(UserError, match="already starts with a system message"):
        render_prompt(messages, template="chat", tokenizer=chat_tokenizer, system_prompt="c")


def test_chat_without_a_chat_template_suggests_plain():
    with pytest.raises(UserError, match='has none .*use template "plain"'):
        render_prompt("hi", template="chat", tokenizer=tiny_tokenizer(None))


def test_chat_without_a_tokenizer_is_a_user_error():
    with pytest.raises(UserError, match="needs the tokenizer"):
        render_prompt("hi", template="chat")
