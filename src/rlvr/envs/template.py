"""Messages to prompt ids (the tokenizer's chat template) and sampled text to an OpenAI message.

Tool-call arguments in the history arrive as JSON strings (OpenAI's wire format); they are parsed into mappings
before rendering, or templates that `tojson` them would encode them twice.

The model's tool calls become OpenAI `tool_calls`: read by transformers' `parse_response` where the tokenizer
has a response template, else in the Hermes / Qwen form, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`,
every call of the message, none inside `<think>...</think>`; Mistral's `[TOOL_CALLS][{...}, ...]`; or Llama 3's,
the whole message a JSON object `{"name": ..., "parameters": {...}}` (`;` between several). A call that cannot
be read stays in the text and is counted (`unreadable`); the message's text is what remains outside the calls."""

from __future__ import annotations

import copy
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HERMES_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
THINKING = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
MISTRAL_CALLS = "[TOOL_CALLS]"
LLAMA_TAG = "<|python_tag|>"
TOOL_MARKERS = (MISTRAL_CALLS, LLAMA_TAG, "<tool_call>", "</tool_call>")


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    """The ids of `messages` (and `tools`) as the chat template renders them, ready for the assistant's turn."""
    rendered = tokenizer.apply_chat_template(_arguments_parsed(messages), tools=tools or None,
                                             add_generation_prompt=True, tokenize=True, return_dict=True)
    return list(rendered["input_ids"])


def text_prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    """A /completions prompt's ids, as the text is (no special tokens added)."""
    return list(tokenizer(prompt, add_special_tokens=False).input_ids)


def completion_text(tokenizer: Any, token_ids: list[int]) -> str:
    """The text of sampled ids, special tokens (the end of turn) left out, except the tool-call markers that are
    special tokens in some vocabularies (Mistral's `[TOOL_CALLS]`, Llama 3's `<|python_tag|>`): the calls after
    them are read from the text."""
    markers = _special_markers(tokenizer)
    if not markers.keys() & set(token_ids):
        return str(tokenizer.decode(token_ids, skip_special_tokens=True))
    parts: list[str] = []
    run: list[int] = []
    for token in token_ids:
        if token in markers:
            parts += [tokenizer.decode(run, skip_special_tokens=True), markers[token]]
            run = []
        else:
            run.append(token)
    return "".join([*parts, tokenizer.decode(run, skip_special_tokens=True)])


def first_prefix(n: int, holds: Callable[[int], bool]) -> int:
    """The fewest leading tokens k (1 ≤ k ≤ n) for which `holds(k)`, found by bisection (a prefix's text only
    grows: once true, true for every longer prefix); n when none is.

    >>> first_prefix(10, lambda k: k >= 4), first_prefix(10, lambda k: False)
    (4, 10)
    """
    low, high = 1, n
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if holds(middle) else (middle + 1, high)
    return high


_MARKERS: dict[int, tuple[Any, dict[int, str]]] = {}  # id(tokenizer) -> (tokenizer, its special markers' ids)


def _special_markers(tokenizer: Any) -> dict[int, str]:
    """The tool-call markers that are special tokens of `tokenizer` (decoding would skip them), by id."""
    known = _MARKERS.get(id(tokenizer))
    if known is None or known[0] is not tokenizer:
        special = set(getattr(tokenizer, "all_special_ids", None) or [])
        ids = {m: tokenizer.convert_tokens_to_ids(m) for m in TOOL_MARKERS} if special else {}
        known = _MARKERS[id(tokenizer)] = (tokenizer, {i: m for m, i in ids.items() if i in special})
    return known[1]


def function_tool(name: str, description: str | None = None, parameters: Any = None) -> dict[str, Any]:
    """A tool in the chat template's (and OpenAI chat's) form, its description and parameters where given.

    >>> function_tool("add", "Add two integers.")
    {'type': 'function', 'function': {'name': 'add', 'description': 'Add two integers.'}}
    """
    given = {"description": description, "parameters": parameters}
    return {"type": "function", "function": {"name": name, **{k: v for k, v in given.items() if v is not None}}}


def renders_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template shows the tools offered to the model (SmolLM2's, for one, does not)."""
    known = _TOOLS_SHOWN.get(id(tokenizer))
    if known is None or known[0] is not tokenizer:
        probe = [function_tool("rlvr_probe_tool", "", {"type": "object", "properties": {}})]
        try:
            text = tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tools=probe, tokenize=False)
        except Exception:  # (a template that fails on tools shows none)
            text = ""
        known = _TOOLS_SHOWN[id(tokenizer)] = (tokenizer, "rlvr_probe_tool" in str(text))
    return known[1]


_TOOLS_SHOWN: dict[int, tuple[Any, bool]] = {}


def _arguments_parsed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` as templates take them: tool-call arguments parsed, and no content None (an assistant message
    of tool calls, as OpenAI clients send it: a template that reads its content would fail on it)."""
    if not any(m.get("tool_calls") or ("content" in m and m["content"] is None) for m in messages):
        return messages
    parsed = copy.deepcopy(messages)
    for message in parsed:
        if "content" in message and message["content"] is None:
            message["content"] = ""
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            if isinstance(function.get("arguments"), str):
                try:
                    function["arguments"] = json.loads(function["arguments"])
                except json.JSONDecodeError:
                    pass  # (left as the agent wrote it)
    return parsed


@dataclass
class Reply:
    """The assistant message a completion's text makes: its content, its tool calls in OpenAI's form, and how many
    calls could not be read."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    unreadable: int = 0

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


def reply(tokenizer: Any, text: str, tools: list[dict[str, Any]] | None) -> Reply:
    """The OpenAI message of a completion's `text` (tool calls read only when the request offered `tools`)."""
    if not tools:
        return Reply(text)
    if getattr(tokenizer, "response_template", None) is not None:
        try:
            parsed = tokenizer.parse_response(text, prefix="", tools=tools)
        except ValueError:
            return Reply(text, unreadable=1)
        calls = [_openai_call(c.get("function") or c) for c in parsed.get("tool_calls") or []]
        return Reply(str(parsed.get("content") or "") if calls else text, calls)
    if HERMES_CALL.search(text):
        return _hermes(text)
    return _mistral(text) if MISTRAL_CALLS in text else _llama(text)


def _mistral(text: str) -> Reply:
    """Mistral's form: `[TOOL_CALLS]` then a JSON list of {name, arguments}, after any text."""
    content, _, calls_text = text.partition(MISTRAL_CALLS)
    try:
        calls = json.loads(calls_text.strip())
        calls = calls if isinstance(calls, list) else [calls]
        if not calls or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
            raise ValueError("no name")
    except ValueError:
        return Reply(text, unreadable=1)
    return Reply(content.strip(), [_openai_call(c) for c in calls])


def _llama(text: str) -> Reply:
    """Llama 3's form: the whole message one JSON object {name, parameters} (after `<|python_tag|>`, if any),
    or several separated by `;`; any other message is text."""
    body = text.strip().removeprefix(LLAMA_TAG).strip()
    if not body.startswith("{"):
        return Reply(text)
    try:
        calls = _json_objects(body)
    except ValueError:
        return Reply(text, unreadable=int(text.strip().startswith(LLAMA_TAG)))
    if not all(isinstance(c, dict) and isinstance(c.get("name"), str) and
               ("parameters" in c or "arguments" in c) for c in calls):
        return Reply(text)
    return Reply("", [_openai_call(c) for c in calls])


def _json_objects(text: str) -> list[Any]:
    """The JSON values of `text`, separated by `;` (a `;` inside a string is the string's)."""
    decoder, values, i = json.JSONDecoder(), [], _after_spaces(text, 0)
    while i < len(text):
        value, i = decoder.raw_decode(text, i)
        values.append(value)
        i = _after_spaces(text, i)
        if i < len(text):
            if text[i] != ";":
                raise ValueError("not ;-separated JSON")
            i = _after_spaces(text, i + 1)
    return values


def _after_spaces(text: str, i: int) -> int:
    return len(text) - len(text[i:].lstrip())


def _hermes(text: str) -> Reply:
    thinking = [m.span() for m in THINKING.finditer(text)]
    calls, unreadable, kept, start = [], 0, [], 0
    for match in HERMES_CALL.finditer(text):
        if any(a <= match.start() < b for a, b in thinking):
            continue  # (a call the model only thought about)
        try:
            call = json.loads(match.group(1))
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ValueError("no name")
        except ValueError:  # (json.JSONDecodeError too): left in the text for the agent to see
            unreadable += 1
            continue
        calls.append(_openai_call(call))
        kept.append(text[start:match.start()])
        start = match.end()
    kept.append(text[start:])
    return Reply("".join(kept).strip() if calls else text, calls, unreadable)


def _openai_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments", call.get("parameters", {}))
    # (nine letters and digits: what Mistral's templates insist on, and any other's accept)
    return {"id": secrets.token_hex(5)[:9], "type": "function",
            "function": {"name": call["name"],
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}
