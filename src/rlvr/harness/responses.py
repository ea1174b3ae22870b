"""OpenAI's Responses API (`POST .../responses`) on the policy's endpoint, as the chat completion it is underneath.

    responses body ─chat_body─▶ chat completion (recorded, seeded, spliced as any) ─response_of─▶ a Response

The subset the `openai` client's `responses.create` and the OpenAI Agents SDK send: `input` (a string, or items:
messages with text content, `function_call`, `function_call_output`; `reasoning` items are skipped), `instructions`
(the system message), function `tools`, `tool_choice`, `max_output_tokens`, `temperature` / `top_p` (held to the
endpoint's rule, rlvr.harness.request), `text.format` (text only), `previous_response_id` (a response this
rollout served: its conversation continues, so its ids are spliced like a chat turn's), `stream` (the events a
client reads: created, each output item added and done, its text, completed). What it cannot honour is refused
(400) naming the field: `conversation`, `prompt` templates, `background`, `reasoning` settings, hosted tools
(web search, file search, ...), `truncation: auto`. `store`, `include`, `metadata`, `parallel_tool_calls`,
`user` change nothing drawn and are ignored.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from rlvr.envs.template import function_tool
from rlvr.harness.request import Refused, joined_text

UNSUPPORTED = ("conversation", "prompt", "background", "reasoning")


def chat_body(body: dict[str, Any], previous: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The chat completion request a Responses request is (see the module docstring); `previous`: the conversation
    of the response named by `previous_response_id`, its answer last."""
    for name in UNSUPPORTED:
        if body.get(name) is not None:
            raise Refused(400, f"{name}: the policy's endpoint does not serve Responses' {name}; leave it out")
    if body.get("truncation") not in (None, "disabled"):
        raise Refused(400, f"truncation={body['truncation']!r}: the endpoint never drops context; leave it out")
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    messages = list(previous or [])
    if body.get("instructions") and not previous:
        messages.append({"role": "system", "content": _text(body["instructions"], "instructions")})
    messages += input_messages(body.get("input"))
    chat: dict[str, Any] = {"messages": messages}
    if body.get("tools") is not None:
        chat["tools"] = _tools(body["tools"])
    if fmt is not None:
        chat["response_format"] = fmt
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        choice = {"type": "function", "function": {"name": choice.get("name")}}
    for name, value in (("tool_choice", choice), ("max_tokens", body.get("max_output_tokens"))):
        if value is not None:
            chat[name] = value
    for name in ("temperature", "top_p", "top_logprobs", "stop", "rlvr_train"):
        if body.get(name) is not None:
            chat[name] = body[name]
    return chat


def input_messages(given: Any) -> list[dict[str, Any]]:
    """Responses `input` as chat messages: function calls joined to the assistant message before them."""
    if given is None:
        return []
    if isinstance(given, str):
        return [{"role": "user", "content": given}]
    if not isinstance(given, list) or not all(isinstance(item, dict) for item in given):
        raise Refused(400, "input: give a string or a list of items (messages, function_call, function_call_output)")
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(given):
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise Refused(400, f"input[{i}].role={role!r}: give user, assistant, system or developer")
            messages.append({"role": "system" if role == "developer" else role,
                             "content": _text(item.get("content"), f"input[{i}].content")})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments", "{}")}}
            if messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": output if isinstance(output, str) else json.dumps(output)})
        elif kind != "reasoning":  # (a reasoning item of an earlier turn: nothing this model reads)
            raise Refused(400, f"input[{i}].type={kind!r}: the endpoint reads messages, function_call and "
                               "function_call_output items")
    return messages


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or parts of type input_text / output_text / text."""
    text = joined_text(content, ("input_text", "output_text", "text"))
    if text is not None:
        return text
    raise Refused(400, f"{where}: give text, or a list of input_text parts (images and files are not served)")


def _tools(tools: Any) -> list[dict[str, Any]]:
    """Responses' function tools ({type, name, description, parameters}) in chat's form; hosted tools refused."""
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise Refused(400, f"tools={str(tools)[:60]!r}: give a list of function tools")
    hosted = [t.get("type") for t in tools if t.get("type") != "function"]
    if hosted:
        raise Refused(400, f"tools: {hosted[0]!r} is a hosted tool the policy's endpoint does not run; give "
                           "function tools (the agent runs them)")
    return [function_tool(t.get("name"), t.get("description"), t.get("parameters")) for t in tools]


def response_of(chat: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The Response of a chat completion answer `chat` to the Responses request `body`."""
    choice = chat["choices"][0]
    message = choice["message"]
    output: list[dict[str, Any]] = []
    if message.get("content"):
        output.append({"type": "message", "id": f"msg_{secrets.token_hex(8)}", "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
    for call in message.get("tool_calls") or []:
        output.append({"type": "function_call", "id": f"fc_{secrets.token_hex(8)}", "call_id": call["id"],
                       "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                       "status": "completed"})
    cut = choice["finish_reason"] == "length"
    usage = chat["usage"]
    return {
        "id": f"resp_{secrets.token_hex(12)}", "object": "response", "created_at": chat["created"],
        "model": chat["model"], "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "error": None,
        "instructions": body.get("instructions"), "metadata": body.get("metadata") or {},
        "output": output, "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "temperature": body.get("temperature"), "top_p": body.get("top_p"),
        "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
        "previous_response_id": body.get("previous_response_id"),
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                  "total_tokens": usage["total_tokens"], "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
        # what vLLM-style clients read back: the exact ids
        "prompt_token_ids": chat["prompt_token_ids"], "token_ids": choice["token_ids"],
    }


def response_events(response: dict[str, Any]) -> str:
    """A Response as the server-sent events a streaming client reads: created, each output item added (its text
    as one delta) and done, then completed with the whole response."""
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {**response, "status": "in_progress",
                                                                             "output": []}}]
    for index, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": {**item, "status": "in_progress"}})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events += [{"type": "response.output_text.delta", "item_id": item["id"], "output_index": index,
                        "content_index": 0, "delta": text},
                       {"type": "response.output_text.done", "item_id": item["id"], "output_index": index,
                        "content_index": 0, "text": text}]
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed" if response["status"] == "completed" else "response.incomplete",
                   "response": response})
    return "".join(f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': i})}\n\n"
                   for i, e in enumerate(events))
