"""Anthropic's Messages API (`POST .../v1/messages`) on the policy's endpoint, as the chat completion it is underneath.

    messages body ─chat_body─▶ chat completion (recorded, seeded, spliced as any) ─message_of─▶ a Message

What the `anthropic` SDK's `messages.create` sends: `system` (text, or text blocks), `messages` whose content is
text or blocks (`text`, `tool_use` in the assistant's, `tool_result` in the user's), `tools` (name, description,
input_schema), `tool_choice` auto or none, `max_tokens`, `stop_sequences`, `temperature` / `top_p` / `top_k` (held
to the endpoint's rule, rlvr.harness.request), `stream` (message_start, each content block's start, delta and
stop, message_delta, message_stop). Refused (400) naming the field: `tool_choice` any or a named tool (the
endpoint cannot force a call), `thinking`, image and document blocks. `metadata` changes nothing drawn.
`link.anthropic()` gives an `anthropic.Anthropic` client on the rollout (the SDK appends /v1/messages to its
base URL).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from rlvr.envs.template import function_tool
from rlvr.harness.request import Refused, joined_text


def chat_body(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion request a Messages request is (see the module docstring)."""
    if body.get("thinking") is not None:
        raise Refused(400, "thinking: the policy's endpoint has no extended thinking to turn on; leave it out")
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": _text(body["system"], "system")})
    given = body.get("messages")
    if not isinstance(given, list) or not given or not all(isinstance(m, dict) for m in given):
        raise Refused(400, "messages must be a non-empty list of {role, content} objects")
    for i, message in enumerate(given):
        messages += _chat_messages(message, i)
    chat: dict[str, Any] = {"messages": messages}
    if body.get("tools") is not None:
        chat["tools"] = _tools(body["tools"])
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else choice
        if kind not in ("auto", "none"):
            raise Refused(400, f"tool_choice={choice!r}: the policy's endpoint cannot force a tool call; give auto "
                               "or none, or leave it out")
        chat["tool_choice"] = kind
    sequences = body.get("stop_sequences")
    if sequences is not None and not isinstance(sequences, list):
        raise Refused(400, f"stop_sequences={sequences!r}: give a list of strings")
    for theirs, ours in (("max_tokens", "max_tokens"), ("stop_sequences", "stop"), ("temperature", "temperature"),
                         ("top_p", "top_p"), ("top_k", "top_k"), ("rlvr_train", "rlvr_train")):
        if body.get(theirs) is not None:
            chat[ours] = body[theirs]
    return chat


def _chat_messages(message: dict[str, Any], i: int) -> list[dict[str, Any]]:
    """One Messages message as chat messages: an assistant's tool_use blocks its tool_calls, a user's tool_result
    blocks tool messages (before its text)."""
    role, content = message.get("role"), message.get("content")
    if role not in ("user", "assistant"):
        raise Refused(400, f"messages[{i}].role={role!r}: give user or assistant (the system prompt is `system`)")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise Refused(400, f"messages[{i}].content: give text, or a list of content blocks")
    texts, calls, results = [], [], []
    for j, block in enumerate(content):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use" and role == "assistant":
            calls.append({"id": block.get("id"), "type": "function",
                          "function": {"name": block.get("name"), "arguments": json.dumps(block.get("input", {}))}})
        elif kind == "tool_result" and role == "user":
            inner = block.get("content", "")
            output = inner if isinstance(inner, str) else _text(inner, f"messages[{i}].content[{j}]")
            results.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": output})
        else:
            raise Refused(400, f"messages[{i}].content[{j}].type={kind!r}: the endpoint reads text, an assistant's "
                               "tool_use and a user's tool_result blocks (images and documents are not served)")
    if role == "assistant":
        said: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
        return [{**said, "tool_calls": calls} if calls else said]
    return [*results, *([{"role": "user", "content": "".join(texts)}] if texts or not results else [])]


def _text(content: Any, where: str) -> str:
    text = joined_text(content)
    if text is not None:
        return text
    raise Refused(400, f"{where}: give text, or a list of text blocks")


def _tools(tools: Any) -> list[dict[str, Any]]:
    """Anthropic's tools ({name, description, input_schema}) in chat's form; server tools refused."""
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
        raise Refused(400, f"tools={str(tools)[:60]!r}: give a list of {{name, description, input_schema}} tools")
    served = [t for t in tools if t.get("type") in (None, "custom")]
    if len(served) != len(tools):
        kind = next(t.get("type") for t in tools if t not in served)
        raise Refused(400, f"tools: {kind!r} is a server tool the policy's endpoint does not run; give client tools")
    return [function_tool(t["name"], t.get("description", ""), t.get("input_schema", {"type": "object"}))
            for t in tools]


def message_of(chat: dict[str, Any]) -> dict[str, Any]:
    """The Message of a chat completion answer `chat`."""
    choice = chat["choices"][0]
    message = choice["message"]
    content: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        try:
            arguments = json.loads(call["function"]["arguments"] or "{}")
        except json.JSONDecodeError:
            arguments = {}
        content.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": arguments})
    sequence = choice.get("stop_reason") if isinstance(choice.get("stop_reason"), str) else None
    stop = ("max_tokens" if choice["finish_reason"] == "length" else "stop_sequence" if sequence else
            "tool_use" if message.get("tool_calls") else "end_turn")
    return {"id": f"msg_{secrets.token_hex(12)}", "type": "message", "role": "assistant", "model": chat["model"],
            "content": content, "stop_reason": stop, "stop_sequence": sequence,
            "usage": {"input_tokens": chat["usage"]["prompt_tokens"],
                      "output_tokens": chat["usage"]["completion_tokens"]},
            "prompt_token_ids": chat["prompt_token_ids"], "token_ids": choice["token_ids"]}


def message_events(message: dict[str, Any]) -> str:
    """A Message as the server-sent events the anthropic SDK's stream reads."""
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        **message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 0}}}]
    for index, block in enumerate(message["content"]):
        start: dict[str, Any]
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [{"type": "content_block_start", "index": index, "content_block": start},
                   {"type": "content_block_delta", "index": index, "delta": delta},
                   {"type": "content_block_stop", "index": index}]
    events += [{"type": "message_delta", "delta": {"stop_reason": message["stop_reason"],
                                                   "stop_sequence": message["stop_sequence"]},
                "usage": {"output_tokens": message["usage"]["output_tokens"]}},
               {"type": "message_stop"}]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
