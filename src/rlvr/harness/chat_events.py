"""A chat or text completion answer as the server-sent events a streaming OpenAI client reads (`stream: true`)."""

from __future__ import annotations

import json
from typing import Any


def chat_events(answer: dict[str, Any], usage: bool = False) -> str:
    """A streamed answer as server-sent events: the whole of each choice in one chunk, then its end, then (with
    `usage`, what stream_options.include_usage asks) a chunk of no choices with the usage, then [DONE]."""
    chat = answer["object"] == "chat.completion"
    head = {"id": answer["id"], "created": answer["created"], "model": answer["model"],
            "object": "chat.completion.chunk" if chat else "text_completion"}
    events = []
    for choice in answer["choices"]:
        end = choice["finish_reason"]
        if chat:
            delta = dict(choice["message"])
            if "tool_calls" in delta:  # (a streamed call carries its index)
                delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(delta["tool_calls"])]
            pieces = [{"delta": delta, "finish_reason": None}, {"delta": {}, "finish_reason": end}]
        else:
            pieces = [{"text": choice["text"], "finish_reason": None}, {"text": "", "finish_reason": end}]
        events += [{**head, "choices": [{"index": choice["index"], **piece}]} for piece in pieces]
    if usage:
        events.append({**head, "choices": [], "usage": answer["usage"]})
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
