"""The environment protocol: what a multi-turn rollout needs from the world the model acts in.

A trajectory starts from a dataset row: `reset(row, messages, seed)` gets the row (its columns) and
the prompt's chat messages, and returns the messages the conversation starts with (the same ones, or
with the environment's instructions added). Then, until `done`, each model message goes to
`step(text)`, which answers with a `Reply`: the environment's message (a tool's output, the game's
feedback), whether the trajectory is over, and its reward when the environment scores it (None: the
task's verifier scores the final answer, as without an environment). `info` counts what happened in
the step (tool calls, tool errors, timeouts), summed into the step's metrics. An environment may also
have `message_done(text) -> bool`: called on the message being written, True ends it there (a tool call
is complete: decoding stops instead of running on to the end of the turn), `bind(tokenizer)`: called
with the policy's tokenizer before `reset`, and `tools`: tool schemas the chat template lists in the
prompt (for calls in the template's own format).

One environment object serves one trajectory: it is created for it, seeded from the run's generator,
and dropped when the trajectory ends, inside the training step; no environment outlives a step, so a
checkpoint holds none and a resumed run re-creates them with the same seeds (exact resume).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from rlvr.errors import UserError, first_line

Message = dict[str, str]  # {"role": ..., "content": ...}


@dataclass(frozen=True)
class Reply:
    """What the environment answers to one model message."""

    message: Message | None  # the environment's turn ({"role": "tool" | "user", "content": ...}); None when done
    done: bool
    reward: float | None = None  # the trajectory's reward when done; None = the task's verifier decides
    keep: int | None = None  # characters of the model's message that stand (a tool call ends its turn); None = all
    info: dict[str, float] = field(default_factory=dict)  # e.g. {"tool_calls": 1, "tool_errors": 0, "timeouts": 0}


class Environment(Protocol):
    def reset(self, row: dict[str, Any], messages: list[Message], seed: int) -> list[Message]: ...
    def step(self, text: str) -> Reply: ...


def calling(env: Any, method: str, *args: Any) -> Any:
    """`env.method(*args)`, where an exception (a bug in the environment's code) ends the run with one line
    naming the environment, the method and the error."""
    try:
        return getattr(env, method)(*args)
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"environment {type(env).__name__}.{method}() raised {type(e).__name__}: {first_line(e)} "
                        "(fix the environment: a failed tool call belongs in its Reply, as text for the model)") from e
