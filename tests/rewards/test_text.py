"""completion_text: both of TRL's completion forms give the same text."""

import pytest

from rlvr.errors import UserError
from rlvr.rewards.text import completion_text


def test_string_and_message_forms():
    assert completion_text("4") == "4"
    assert completion_text([{"role": "assistant", "content": "4"}]) == "4"
    assert completion_text({"role": "assistant", "content": "4"}) == "4"


def test_last_message_is_the_completion():
    messages = [{"role": "assistant", "content": "draft"}, {"role": "assistant", "content": "final"}]
    assert completion_text(messages) == "final"


def test_content_parts_are_joined():
    message = {"role": "assistant", "content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}]}
    assert completion_text([message]) == "42"


def test_empty_and_missing_content():
    assert completion_text([]) == ""
    assert completion_text([{"role": "assistant", "content": None}]) == ""


def test_other_types_are_a_user_error():
    with pytest.raises(UserError, match="int"):
        completion_text(4)
