"""The prompt ids of a request that continues a recorded turn: that turn's ids verbatim, never rendered again.

An agent's next request repeats the conversation so far: its earlier messages, the assistant message it was
served, then what came since (tool results, a user's reply). Rendering all of it again by the chat template
would tokenise the model's own text anew, and the ids need not be the ones it sampled (a template that rewrites
earlier turns, a text that decodes and encodes back differently). So where a recorded turn's request and the
message it was answered with begin this request, the prompt is that turn's prompt ids and sampled ids as they
were, the turn's closing where decoding was cut, then the template's text for the messages after it (as
rlvr.envs' TurnFormat bridges a turn). Only then does a turn's prompt extend the one before, token for token,
so that the turns of a rollout make one training row. A request that continues no recorded turn (the agent
rewrote its history) is rendered whole: a new segment.
"""

from __future__ import annotations

import json
from typing import Any

from rlvr.envs.rollout import TurnFormat
from rlvr.harness.recorder import Turn


def spliced_prompt(turns: list[Turn], messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   fmt: TurnFormat) -> list[int] | None:
    """The prompt ids of `messages` (offering `tools`) continuing the latest recorded turn they extend; None when
    they extend none (then the request is rendered whole)."""
    for turn in reversed(turns):
        asked = turn.request.get("messages") or []
        k = len(asked)
        after = messages[k + 1:]
        if (turn.message is None or turn.request.get("tools") != tools or not after
                or not all(_same(a, b) for a, b in zip(messages[:k], asked)) or not _same(messages[k], turn.message)
                or any(m.get("role") not in ("tool", "user") for m in after)):
            continue
        try:
            bridge = fmt.replies_text(after)
        except ValueError:  # (a template that rewrites earlier turns: rendered whole)
            return None
        closing = "" if turn.closed else fmt.end_of_turn  # (cut by the budget or a stop string: closed as context)
        return [*turn.prompt_ids, *turn.token_ids, *fmt.encode(closing + fmt.after_end + bridge)]
    return None


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two messages say the same: role, text and tool calls (arguments compared as what they encode);
    the other fields an agent echoes back (ids, `reasoning_content: null`, `refusal`) do not count."""
    return (a.get("role") == b.get("role") and (a.get("content") or "") == (b.get("content") or "")
            and _calls(a) == _calls(b) and a.get("tool_call_id") == b.get("tool_call_id"))


def _calls(message: dict[str, Any]) -> list[tuple[Any, Any]]:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                pass
        calls.append((function.get("name"), json.dumps(arguments, sort_keys=True)))
    return calls
