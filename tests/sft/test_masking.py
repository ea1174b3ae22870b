"""Which tokens carry loss, checked position by position on the tiny character-level tokenizer
(one token per character; <|im_start|> and <|im_end|> are one token each)."""

import pytest

from rlvr.errors import UserError
from rlvr.models import build_tiny_tokenizer
from rlvr.sft.masking import IGNORE, encode_segments, row_segments, trained_count


@pytest.fixture(scope="module")
def tok():
    return build_tiny_tokenizer()


def encode(tok, row, template="chat", system_prompt=None):
    segments = row_segments(row, tokenizer=tok, template=template, system_prompt=system_prompt, where="d.jsonl:1")
    return encode_segments(segments, tok, add_special_tokens=template != "chat")


def trained_positions(labels):
    return [i for i, label in enumerate(labels) if label != IGNORE]


def test_prompt_completion_chat_trains_the_completion_and_its_end_of_turn_only(tok):
    ids, labels = encode(tok, {"prompt": "2+2?", "completion": "4"})
    # <|im_start|> user\n (5) 2+2? (4) <|im_end|> \n <|im_start|> assistant\n (10) = 23 prompt tokens,
    # then "4" (23) and <|im_end|> (24) trained, then the template's closing "\n" (25) not
    assert len(ids) == 26
    assert labels == [IGNORE] * 23 + [tok.convert_tokens_to_ids("4"), tok.eos_token_id, IGNORE]
    assert ids[23:25] == labels[23:25]
    assert trained_count(labels) == 2


def test_multi_turn_chat_trains_every_assistant_turn_and_nothing_else(tok):
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
    ]
    ids, labels = encode(tok, {"messages": messages})
    # system header 8 + "be brief" 8 + <|im_end|>\n 2 = 18; user header 6 + "hi" 2 + 2 = 28;
    # assistant header 11 -> "yo" at 39, 40 and <|im_end|> at 41; "\n" 42; user header 43..48,
    # "2+2?" 49..52, <|im_end|>\n 53, 54; assistant header 55..65 -> "4" at 66, <|im_end|> at 67; "\n" 68
    assert len(ids) == 69
    assert trained_positions(labels) == [39, 40, 41, 66, 67]
    assert tok.decode(ids[39:42]) == "yo<|im_end|>" and tok.decode(ids[66:68]) == "4<|im_end|>"
    assert tok.decode(ids[55:66]) == "<|im_start|>assistant\n"  # the header itself is not trained


def test_system_prompt_is_a_system_message_and_never_trained(tok):
    ids, labels = encode(tok, {"prompt": "hi", "completion": "yo"}, system_prompt="be brief")
    assert tok.decode(ids).startswith("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi")
    assert tok.decode([t for t in labels if t != IGNORE]) == "yo<|im_end|>"
    with pytest.raises(UserError, match="d.jsonl:1: the row starts with a system message"):
        encode(tok, {"messages": [{"role": "system", "content": "x"}, {"role": "assistant", "content": "y"}]},
               system_prompt="z")


def test_plain_template_appends_the_eos_token_to_the_completion(tok):
    ids, labels = encode(tok, {"prompt": "Q: 1+1\nA: ", "completion": "2"}, template="plain")
    assert tok.decode(ids) == "Q: 1+1\nA: 2<|im_end|>"
    assert trained_positions(labels) == [10, 11] and labels[11] == tok.eos_token_id


def test_custom_template_renders_the_prompt_like_grpo_does(tok):
    ids, labels = encode(tok, {"prompt": "1+1", "completion": " 2"}, template="Q: {prompt}\nA:")
    assert tok.decode(ids) == "Q: 1+1\nA: 2<|im_end|>"
    assert tok.decode([t for t in labels if t != IGNORE]) == " 2<|im_end|>"


def test_chat_prompt_given_as_messages_gets_the_completion_as_last_turn(tok):
    row = {"prompt": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                      {"role": "user", "content": "c"}],
           "completion": "d"}
    _ids, labels = encode(tok, row)
    # only the completion is trained; an assistant turn inside the prompt is context
    assert tok.decode([t for t in labels if t != IGNORE]) == "d<|im_end|>"


def test_messages_rows_need_the_chat_template(tok):
    with pytest.raises(UserError, match='d.jsonl:1: a "messages" row needs template "chat"'):
        encode(tok, {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
               template="plain")


def test_chat_template_missing_is_a_user_error(tok):
    bare = build_tiny_tokenizer()
    bare.chat_template = None
    with pytest.raises(UserError, match="template=plain"):
        encode(bare, {"prompt": "a", "completion": "b"})
