"""The environment protocol: what a multi-turn rollout needs from the world the model acts in.

A trajectory starts from a dataset row: `reset(row, messages, seed)` gets the row (its columns) and
the prompt's chat messages, and returns the messages the conversation starts with (the same ones, or
with the environment's instructions added). Then, until `done`, each model message goes to
`step(text)`, which answers with a `Reply`: the environment's message (a tool's output, the game's
feedback), whether the trajectory is over, and its reward when the environment scores it (None: the
task's verifier scores the final answer, as without an environment); a reward in a reply before the end is
that message's own, added to the trajectory's. `info` counts what happened in
the step (tool calls, tool errors, timeouts), summed into the step's metrics. An environment may also
have `message_done(text) -> bool`: called on the message being written, True ends it there (a tool call
is complete: decoding stops instead of running on to the end of the turn), `bind(tokenizer)`: called
with the policy's tokenizer before `reset`, and `tools`: tool schemas the chat template lists in the
prompt (for calls in the template's own format). Any of its methods may be `async def`: each call is run to
its end on an event loop of its own, under the same time limit.

One environment object serves one trajectory: it is created for it, seeded from the run's generator,
and dropped when the trajectory ends, inside the training step; no environment outlives a step, so a
checkpoint holds none and a resumed run re-creates them with the same seeds (exact resume).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import numbers
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlvr.deadline import call_user
from rlvr.errors import UserError, first_line

Message = dict[str, str]  # {"role": ..., "content": ...}


@dataclass(frozen=True)
class Reply:
    """What the environment answers to one model message."""

    # the environment's turn ({"role": "tool" | "user", "content": ...}), or several (one tool message per call of
    # the model's message); None when done
    message: Message | list[Message] | None
    done: bool
    # done: the trajectory's reward (None = the task's verifier decides); before: the reward of the message this
    # replies to (a game's points), added to the trajectory's (algorithm.turn_advantages: how it is credited)
    reward: float | None = None
    keep: int | None = None  # characters of the model's message that stand (a tool call ends its turn); None = all
    info: dict[str, float] = field(default_factory=dict)  # e.g. {"tool_calls": 1, "tool_errors": 0, "timeouts": 0}


class Environment(Protocol):
    """What rlvr calls of an environment; optional too: `close()` (called once its trajectory is over, however it
    ended), `bind(tokenizer)`, `message_done(text)`, `tools`, and `step(text, tool_calls)`."""

    def reset(self, row: dict[str, Any], messages: list[Message], seed: int) -> list[Message]: ...
    def step(self, text: str) -> Reply: ...


SETTING = "environment.timeout_s"


EXIT_FIX = "end a trajectory with Reply(done=True), or raise an exception for a bug"

def calling(env: Any, method: str, *args: Any, seconds: float | None = None) -> Any:
    """`env.method(*args)`, under the time limit `seconds` on the main thread (rlvr.deadline), where an exception
    (a bug in the environment's code) or sys.exit ends the run with one line naming the environment, the method
    and the error. Worker threads call it too, to get the same errors; their caller waits with `wait_for`."""
    name = _name(env, method)
    try:
        return call_user(name, lambda: _awaited(getattr(env, method)(*args)), seconds, SETTING, EXIT_FIX)
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"{name} raised {type(e).__name__}: {first_line(e)} "
                        "(fix the environment: a failed tool call belongs in its Reply, as text for the model)") from e


def _awaited(result: Any) -> Any:
    """What an `async` method returned, run to its end on an event loop of its own (each call runs on one thread:
    the main one or a worker's); a plain method's result as it is."""
    if not inspect.isawaitable(result):
        return result

    async def wait() -> Any:
        return await result

    return asyncio.run(wait())


def step_arguments(env: Any, tokenizer: Any, text: str) -> tuple[Any, ...]:
    """What `env.step` is called with for the model's message `text`: (text,), or (text, tool_calls) when its step
    takes `tool_calls`: every call of the message in the chat template's format (rlvr.envs.template: the
    tokenizer's parse_response, else Hermes/Qwen `<tool_call>` JSON; none inside thinking), each
    {"id", "name", "arguments": {...}}, arguments parsed (text when they are not JSON)."""
    try:
        wants = "tool_calls" in inspect.signature(env.step).parameters
    except (TypeError, ValueError):
        wants = False
    if not wants:
        return (text,)
    from rlvr.envs.template import reply

    calls = []
    tools = getattr(env, "tools", None) or [{"type": "function", "function": {"name": "any", "parameters": {}}}]
    for call in reply(tokenizer, text, tools).tool_calls:
        arguments = call["function"]["arguments"]
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
        calls.append({"id": call["id"], "name": call["function"]["name"], "arguments": arguments})
    return text, calls


def replies(reply: Reply) -> list[Message]:
    """The environment's messages of a Reply (its one message, or its list)."""
    if reply.message is None:
        return []
    return list(reply.message) if isinstance(reply.message, list) else [reply.message]


def wait_for(env: Any, method: str, future: Future[Any], seconds: float | None, started: float) -> Any:
    """What `calling(env, method, ...)`, sent to a worker thread at `started` (time.monotonic), returned; a
    one-line UserError when it has not within `seconds` of that (the worker thread is left behind: it
    cannot be stopped, and never keeps the process from ending, rlvr.deadline.DaemonPool)."""
    return call_user(_name(env, method), future.result, seconds, SETTING, EXIT_FIX, started=started)


def checked_reply(env: Any, reply: Any) -> Reply:
    """`reply`, what env.step() returned, if it is a well-formed Reply; else a one-line UserError saying what is wrong.

    >>> checked_reply(object(), Reply(None, done=True, reward=0.5)).reward
    0.5
    >>> checked_reply(object(), "4")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    rlvr.errors.UserError: environment object.step() returned str '4', not a Reply (return rlvr.envs.Reply(...
    """
    name = _name(env, "step")
    if not isinstance(reply, Reply):
        raise UserError(f"{name} returned {_describe(reply)}, not a Reply "
                        "(return rlvr.envs.Reply(message={'role': 'user', 'content': ...}, done=...))")
    if reply.reward is not None and not _is_number(reply.reward):
        raise UserError(f"{name} returned a Reply whose reward is {_describe(reply.reward)} (a reward is a number, "
                        "or None to let the task's verifiers score the final answer)")
    if reply.message is not None and not (_is_message(reply.message) or (
            isinstance(reply.message, list) and reply.message and all(_is_message(m) for m in reply.message))):
        raise UserError(f"{name} returned a Reply whose message is {_describe(reply.message)} "
                        "(a message is {'role': 'user' or 'tool', 'content': text}, a list of them, or None when "
                        "done)")
    if reply.keep is not None and (not isinstance(reply.keep, int) or isinstance(reply.keep, bool) or reply.keep < 0):
        raise UserError(f"{name} returned a Reply whose keep is {_describe(reply.keep)} (the number of characters "
                        "of the model's message that stand, or None for all)")
    bad = {k: v for k, v in (reply.info.items() if isinstance(reply.info, dict) else {"": reply.info}.items())
           if not isinstance(k, str) or not _is_number(v)}
    if bad:
        raise UserError(f"{name} returned a Reply whose info holds {_describe(bad)} (info counts what happened: "
                        "{name: number})")
    return reply


def checked_messages(env: Any, messages: Any) -> list[Message]:
    """`messages`, what env.reset() returned, if it is a list of chat messages; else a one-line UserError."""
    if not isinstance(messages, list) or not messages or not all(_is_message(m) for m in messages):
        raise UserError(f"{_name(env, 'reset')} returned {_describe(messages)}, not the conversation's first "
                        "messages (return a list of {'role': ..., 'content': text}: the messages it was given, "
                        "or those with the environment's instructions added)")
    return messages


def _name(env: Any, method: str) -> str:
    return f"environment {type(env).__name__}.{method}()"


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_message(message: Any) -> bool:
    return (isinstance(message, dict) and isinstance(message.get("role"), str)
            and isinstance(message.get("content"), str))


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"
