"""The text of one completion, whichever form TRL hands it over in.

TRL passes a completion as a plain string when prompts are strings, and as a list of chat
messages (``[{"role": "assistant", "content": text}]``) when prompts are conversations. Built-in
reward functions accept both, so they call `completion_text` first.
"""

from __future__ import annotations

from typing import Any

from rlvr.errors import UserError, a_kind


def completion_text(completion: Any) -> str:
    """The text of a completion given as a string, a message, or a list of messages.

    For a list of messages this is the content of the last one: the assistant's reply.
    Content given as a list of parts (``[{"type": "text", "text": ...}]``) is joined.

    >>> completion_text("4")
    '4'
    >>> completion_text([{"role": "assistant", "content": "\\\\boxed{4}"}])
    '\\\\boxed{4}'
    >>> completion_text([])
    ''
    >>> completion_text({"text": "4"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: a completion is a dict, not a string or a list of chat messages ...
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, (list, tuple)) and not completion:
        return ""
    message = completion[-1] if isinstance(completion, (list, tuple)) else completion
    if isinstance(message, dict) and "content" in message:
        return _content_text(message["content"])
    raise UserError(
        f"a completion is {a_kind(completion)}, not a string or a list of chat messages "
        "(pass completions the way TRL does: str, or [{'role': 'assistant', 'content': ...}])"
    )


def _content_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a multimodal content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
