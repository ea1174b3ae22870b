"""Messages to prompt ids (the tokenizer's chat template) and sampled ids to an OpenAI message.

Tool-call arguments in the history arrive as JSON strings (OpenAI's wire format); they are parsed into mappings
before rendering, or templates that `tojson` them would encode them twice."""

from __future__ import annotations

import copy
import json
from typing import Any


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    """The ids of `messages` (and `tools`) as the chat template renders them, ready for the assistant's turn."""
    rendered = tokenizer.apply_chat_template(_arguments_parsed(messages), tools=tools or None,
                                             add_generation_prompt=True, tokenize=True, return_dict=True)
    return list(rendered["input_ids"])


def text_prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    """A /completions prompt's ids, as the text is (no special tokens added)."""
    return list(tokenizer(prompt, add_special_tokens=False).input_ids)


def completion_text(tokenizer: Any, token_ids: list[int]) -> str:
    """The text of sampled ids, special tokens (the end of turn) left out."""
    return str(tokenizer.decode(token_ids, skip_special_tokens=True))


def _arguments_parsed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not any(m.get("tool_calls") for m in messages):
        return messages
    parsed = copy.deepcopy(messages)
    for message in parsed:
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            if isinstance(function.get("arguments"), str):
                try:
                    function["arguments"] = json.loads(function["arguments"])
                except json.JSONDecodeError:
                    pass  # (left as the agent wrote it)
    return parsed
