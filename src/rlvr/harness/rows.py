"""A rollout's recorded turns as training rows, by comparing ids, never by rendering messages.

Turns are taken in the order they were recorded. A turn whose prompt ids begin with everything an open segment
holds (its prompt, then every token after it) extends that segment: the ids between are context (the bridge,
tool results: not trained), then its sampled ids are the model's (trained, with the log-probs they were drawn
with). A turn that extends no open segment (the agent rewrote or summarised its history, or sent a request of
its own) opens a new one, its whole prompt context. A segment extended once is closed to other turns (a second
continuation of it, from another of its `n` choices, opens a segment of its own), so no sampled token is ever
trained twice. Each segment is one row; the rows of a rollout share its reward. A turn the agent marked as not
trained (a title, a summary, a judge it asks through the same link) makes no row and extends none: where a later
turn's prompt holds its tokens, they are that turn's context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rlvr.harness.recorder import Turn


@dataclass
class Segment:
    """One training row: the prompt of its first turn, then every token after it, the model's marked."""

    prompt_ids: list[int]
    ids: list[int] = field(default_factory=list)  # after the prompt: sampled tokens and the context between turns
    model_mask: list[bool] = field(default_factory=list)  # True where the model sampled the token
    logprobs: list[float] = field(default_factory=list)  # the sampler's, at the model's tokens; 0.0 elsewhere
    floors: list[float] = field(default_factory=list)  # where top-k / top-p cut (Sampled.floors); −inf elsewhere
    turn_of: list[int] = field(default_factory=list)  # the number of the turn that sampled each token; −1 elsewhere
    truncated: bool = False  # its last turn was cut at its token budget
    turns: int = 0

    @property
    def whole(self) -> list[int]:
        return [*self.prompt_ids, *self.ids]

    def add(self, turn: Turn, context: list[int], number: int) -> None:
        """`context`, then turn number `number`'s sampled ids."""
        self.ids += [*context, *turn.token_ids]
        self.turn_of += [-1] * len(context) + [number] * len(turn.token_ids)
        self.model_mask += [False] * len(context) + [True] * len(turn.token_ids)
        self.logprobs += [0.0] * len(context) + list(turn.logprobs)
        self.floors += [-math.inf] * len(context) + (list(turn.floors) if turn.floors is not None
                                                      else [-math.inf] * len(turn.token_ids))
        self.truncated, self.turns = turn.finish_reason == "length", self.turns + 1


def segments(turns: list[Turn]) -> list[Segment]:
    """The rows a rollout's turns make (see the module docstring), in the order they were opened."""
    rows: list[Segment] = []
    for number, turn in enumerate(turns):
        if not turn.trained:
            continue
        parent = max((s for s in rows if _begins(turn.prompt_ids, s.whole)), key=lambda s: len(s.whole), default=None)
        if parent is None:
            parent = Segment(prompt_ids=list(turn.prompt_ids))
            rows.append(parent)
        # (a segment extended here no longer begins another continuation of what it was: that one opens its own)
        parent.add(turn, turn.prompt_ids[len(parent.whole):], number)
    return rows


def _begins(ids: list[int], prefix: list[int]) -> bool:
    return len(ids) >= len(prefix) and ids[:len(prefix)] == prefix
