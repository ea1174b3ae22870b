"""What an agent may ask of the policy's endpoint: each field of a request read, checked, and held to one rule.

What shapes the distribution a completion is drawn from is the run's, because training needs the log-probs of
that distribution:
- `temperature`, `top_p` and `top_k` are served at the run's values (generation.*) whatever a request says:
  an agent written for another temperature runs unchanged. Each request that asked otherwise is counted
  (env/overridden) and said once a run; with environment.strict_requests it is refused instead (400).
- `max_tokens` (or `max_completion_tokens`) above generation.max_new_tokens is served at that limit, its
  `finish_reason` "length" where the limit cut it; with strict_requests, refused. A prompt that leaves the
  budget no room in the model's context is refused (400), as vLLM does; one that leaves less is served within it.

What the endpoint cannot give is refused (400), naming the field, never ignored with a 200: `response_format`
other than text (JSON mode, a schema), `tool_choice` "required" or a named function, `frequency_penalty` or
`presence_penalty` other than 0 (vLLM's `repetition_penalty` other than 1, `min_p` and `min_tokens` other than
0), a `logit_bias`, `top_logprobs` above 0 (each chosen token's log-prob is
given; the others are not computed). `tool_choice` "none" is honoured: the reply is read as text. What changes
nothing drawn (`seed`, `user`, `metadata`, `store`, ...) is ignored. A field of the wrong type is a 400 naming it.

An agent says which of its calls train: `rlvr_train: false` in the body (the openai SDK's `extra_body`), or the
header `X-RLVR-Train: false`, serves and records the call but leaves its completions out of the training rows
(rlvr.harness.rows): an auxiliary call (a title, a summary, a judge asked through the same link) does not train
with the trajectory's reward.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from rlvr.errors import a_kind
from rlvr.rollout import SamplingParams

MAX_CHOICES = 16
TRAIN_FIELD = "rlvr_train"  # a request's own say whether its completions train: false leaves them out of the rows
TRAIN_HEADER = "X-RLVR-Train"  # the same, as a header (an SDK client's default_headers)
NEUTRAL = {"frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0, "min_p": 0.0,
           "min_tokens": 0.0}  # fields that would change the distribution, at the value that does not


# the chat completion fields a refusal names, as the Responses and Messages APIs name them
SAID_AS = {"responses": {"max_tokens=": "max_output_tokens=", "messages must be": "input must be",
                         "response_format=": "text.format="},
           "messages": {"stop=": "stop_sequences="}}


def in_words_of(route: str, message: str) -> str:
    """A refusal `message` of the chat completion under `route`'s request, with the fields as `route`'s API names
    them (SAID_AS).

    >>> in_words_of("responses", "max_tokens=-1: give a whole number of tokens, 1 or more")
    'max_output_tokens=-1: give a whole number of tokens, 1 or more'
    """
    for chat, theirs in SAID_AS.get(route, {}).items():
        if message.startswith(chat):
            return theirs + message[len(chat):]
    return message


class Refused(Exception):
    """A request the endpoint answers with an HTTP error: its status and a message naming the cause."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Request:
    """A request's fields, checked (see the module docstring)."""

    n: int
    max_tokens: int  # the completion's budget, within generation.max_new_tokens (the context may cut it further)
    stops: list[str]
    tools: list[dict[str, Any]] | None
    read_calls: bool  # tool calls are read from the reply (tools offered, and tool_choice not "none")
    overridden: tuple[str, ...]  # what it asked that was served at the run's values: ("temperature=0.2", ...)
    trained: bool = True  # False: the agent marked the call as not trained (TRAIN_FIELD, or the TRAIN_HEADER)


def read_request(body: dict[str, Any], params: SamplingParams, strict: bool = False) -> Request:
    """`body`'s fields under the rule of the module docstring, or Refused (400) naming the first that breaks it."""
    _unsupported(body)
    n = body.get("n", 1)
    if not _is_int(n) or not 1 <= n <= MAX_CHOICES:
        raise Refused(400, f"n={n!r}: ask for 1 to {MAX_CHOICES} choices")
    overridden = _sampling_overridden(body, params, strict)
    max_tokens, clamped = _budget(body, params, strict)
    tools = _tools(body.get("tools"))
    choice = body.get("tool_choice")
    stream_options = body.get("stream_options") or {}  # (include_usage: read by the handler, as it streams)
    if not isinstance(stream_options, dict):
        raise Refused(400, f"stream_options={stream_options!r}: give an object such as {{\"include_usage\": true}}")
    trained = body.get(TRAIN_FIELD, True)
    if not isinstance(trained, bool):
        raise Refused(400, f"{TRAIN_FIELD}={trained!r}: give true or false (false: this call's completions are "
                           "served but not trained)")
    return Request(n=n, max_tokens=max_tokens, stops=_stop_strings(body), tools=tools,
                   read_calls=bool(tools) and choice != "none", overridden=overridden + clamped, trained=trained)


def json_object(length: str | None, stream: Any) -> dict[str, Any]:
    """A request's body: a JSON object of `length` bytes read from `stream`; else Refused (400) saying what it is."""
    try:
        size = int(length or 0)
    except ValueError:
        raise Refused(400, f"Content-Length {length!r} is not a number of bytes") from None
    try:
        body = json.loads(stream.read(size) or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise Refused(400, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise Refused(400, f"the body is {a_kind(body)}: send a JSON object")
    return body


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def finite_number(value: Any) -> bool:
    """Whether a JSON value is a finite number (not a bool, a string, NaN or an infinity)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _number(body: dict[str, Any], name: str) -> float | None:
    """The field `name` as a finite number, None when absent, else Refused naming it."""
    value = body.get(name)
    if value is None:
        return None
    if not finite_number(value):
        raise Refused(400, f"{name}={value!r}: give a number")
    return float(value)


def _sampling_overridden(body: dict[str, Any], params: SamplingParams, strict: bool) -> tuple[str, ...]:
    """The sampling fields asked other than the run's (each as `name=value`); with `strict`, Refused instead."""
    run = {"temperature": params.temperature, "top_p": params.top_p, "top_k": params.top_k}
    differing = []
    for name, value in run.items():
        given = _number(body, name)
        if name == "top_k" and given is not None and given <= 0:  # (vLLM's -1 and 0: no top-k cut)
            given = 0.0
        if given is not None and given != float(value):
            if strict:
                raise Refused(400, f"{name}={body[name]} differs from the run's {value} (generation.{name}): the "
                                   f"log-probs trained on are of the run's distribution; leave {name} out "
                                   "(environment.strict_requests is on)")
            differing.append(f"{name}={body[name]}")
    return tuple(differing)


def _budget(body: dict[str, Any], params: SamplingParams, strict: bool) -> tuple[int, tuple[str, ...]]:
    """(the completion's budget, what was clamped): a budget above the run's limit is served at the limit."""
    name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    asked, limit = body.get(name), params.max_new_tokens
    if asked is None:
        return limit, ()
    if not _is_int(asked) or asked < 1:
        raise Refused(400, f"{name}={asked!r}: give a whole number of tokens, 1 or more")
    if asked <= limit:
        return asked, ()
    if strict:
        raise Refused(400, f"{name}={asked}: ask for 1 to {limit} tokens (generation.max_new_tokens; "
                           "environment.strict_requests is on)")
    return limit, (f"{name}={asked}",)


def _unsupported(body: dict[str, Any]) -> None:
    """Refused (400) naming a field the endpoint cannot honour."""
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise Refused(400, f"response_format={fmt!r}: the policy's endpoint cannot constrain its output (JSON mode, "
                           "schemas): ask for the format in the prompt and check it in your reward")
    choice = body.get("tool_choice")
    if choice is not None and choice not in ("auto", "none"):
        raise Refused(400, f"tool_choice={choice!r}: the policy's endpoint cannot force a tool call; leave it out "
                           "(or \"auto\"), or \"none\" to read the reply as text")
    for name, neutral in NEUTRAL.items():  # (OpenAI's penalties, and vLLM's own sampling fields)
        value = _number(body, name)
        if value is not None and value != neutral:
            raise Refused(400, f"{name}={body[name]}: it changes the distribution training samples from, which "
                               f"the endpoint does not; leave it out (or {neutral:g})")
    if body.get("logit_bias"):
        raise Refused(400, "logit_bias: biases change the distribution training samples from; leave it out")
    top = body.get("top_logprobs")
    if top is not None and (not _is_int(top) or top < 0):
        raise Refused(400, f"top_logprobs={top!r}: give a whole number")
    if top:
        raise Refused(400, f"top_logprobs={top}: the endpoint gives each chosen token's log-prob "
                           "(logprobs.content), not the alternatives; leave it out (or 0)")


def _tools(tools: Any) -> list[dict[str, Any]] | None:
    """The request's `tools`: a list of {type: function, function: {name, ...}}, else Refused naming it."""
    if tools is None:
        return None
    well_formed = isinstance(tools, list) and all(
        isinstance(t, dict) and t.get("type", "function") == "function" and isinstance(t.get("function"), dict)
        and isinstance(t["function"].get("name"), str) and t["function"]["name"] for t in tools)
    if not well_formed:
        raise Refused(400, f"tools={str(tools)[:60]!r}: give a list of {{\"type\": \"function\", \"function\": "
                           "{\"name\": ..., \"parameters\": ...}} objects")
    return tools or None


MAX_STOPS = 16  # stop strings a request may give (OpenAI's API takes 4, vLLM's and Anthropic's more)


def _stop_strings(body: dict[str, Any]) -> list[str]:
    """The request's `stop`: a string or a list of up to MAX_STOPS, none empty; else a 400."""
    stop = body.get("stop")
    stops = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or len(stops) > MAX_STOPS or not all(isinstance(x, str) and x for x in stops):
        raise Refused(400, f"stop={stop!r}: give a string or a list of up to {MAX_STOPS} non-empty strings")
    return stops


CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")


def chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat request's messages, each of a role OpenAI's API knows, with text content (or none) and well-formed
    tool calls, else refused (400) naming the message."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise Refused(400, "messages must be a non-empty list of {role, content} objects")
    for i, m in enumerate(messages):
        if m.get("role") not in CHAT_ROLES:
            raise Refused(400, f"messages[{i}].role={m.get('role')!r}: give one of {', '.join(CHAT_ROLES)}")
        calls = m.get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(
                isinstance(c, dict) and isinstance(c.get("function"), dict)
                and isinstance(c["function"].get("name"), str) for c in calls)):
            raise Refused(400, f"messages[{i}].tool_calls={str(calls)[:60]!r}: give a list of {{\"id\", \"type\": "
                               "\"function\", \"function\": {\"name\", \"arguments\"}} objects")
    return [_text_content(m, i) for i, m in enumerate(messages)]


def legacy_completion_fields(body: dict[str, Any]) -> None:
    """Refused (400) naming a field of the legacy completions API the endpoint cannot honour: `echo`, `suffix`,
    `best_of` other than n, `logprobs` above 1 (alternatives to each chosen token)."""
    if body.get("echo"):
        raise Refused(400, "echo=true: the endpoint answers with the completion alone; leave it out and prepend the "
                           "prompt yourself")
    if body.get("suffix"):
        raise Refused(400, "suffix: the endpoint cannot fill in the middle; leave it out")
    best_of = body.get("best_of")
    if best_of is not None and best_of != body.get("n", 1):
        raise Refused(400, f"best_of={best_of!r}: the endpoint returns every completion it draws (n); leave best_of "
                           "out and choose among the n yourself")
    logprobs = body.get("logprobs")
    if logprobs is not None and not isinstance(logprobs, bool) and (not _is_int(logprobs) or logprobs > 1):
        raise Refused(400, f"logprobs={logprobs!r}: the endpoint gives each chosen token's log-prob, not the "
                           "alternatives; leave it out (or 0 or 1)")


def joined_text(content: Any, kinds: tuple[str, ...] = ("text",)) -> str | None:
    """`content` as text: a string, or a list of parts ({type, text}) of the `kinds` joined; None for anything else
    (an image, a file, a part of another kind), which the caller refuses in its API's words.

    >>> joined_text([{"type": "text", "text": "2 + "}, {"type": "text", "text": "2?"}]), joined_text([{"type": "x"}])
    ('2 + 2?', None)
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") in kinds
                                         and isinstance(p.get("text"), str) for p in content):
        return "".join(p["text"] for p in content)
    return None


def _text_content(message: dict[str, Any], i: int) -> dict[str, Any]:
    """A message whose content is text: OpenAI's content parts ([{"type": "text", "text": ...}]) joined; None, or
    no content (an assistant message of tool calls), kept; anything else refused (400) naming the message."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return message
    text = joined_text(content)
    if text is not None:
        return {**message, "content": text}
    raise Refused(400, f"messages[{i}].content is {type(content).__name__} {str(content)[:60]!r}: give text, or "
                       "a list of {type: text, text} parts")
