"""One rollout's turns as the endpoint served them: what was sent to the sampler and what it drew."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Turn:
    """One completion the endpoint served: the exact prompt ids the sampler continued, the ids it drew with their
    log-probs, the seed they were drawn from, why decoding ended, and the request it answered."""

    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    seed: int
    finish_reason: str  # "stop" (a stop token) or "length" (the token budget)
    request: dict[str, Any] = field(compare=False)
    choice: int = 0  # which of the request's n choices
    message: dict[str, Any] | None = field(default=None, compare=False)  # the assistant message answered (chat)
    floors: list[float] | None = None  # where top-k / top-p cut each token's distribution (Sampled.floors)
    closed: bool = True  # the model ended its turn itself (its stop token), not the budget or a stop string
    trained: bool = True  # False: the agent marked the call as not trained (served, recorded, in no row)


class Recorder:
    """The turns of one rollout, in the order their responses were written whole; thread-safe (an agent may
    call the endpoint from several threads)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed  # the rollout's completion seed (rlvr.seeds): every draw of it derives from this one
        self._turns: list[Turn] = []
        self._rewards: list[tuple[Turn, float]] = []  # rewards the agent reported, each with the turn before it
        self.tool_parse_errors = 0  # tool calls in the model's messages that could not be read
        self.overridden = 0  # requests served at the run's sampling values or budget (rlvr.harness.request)
        self.answers: dict[str, dict[str, Any]] = {}  # each request answered (route and body as JSON): its answer
        self.conversations: dict[str, list[dict[str, Any]]] = {}  # a Responses answer's id: its chat, answer last
        self._requests: dict[tuple[int, ...], int] = {}  # prompt ids -> how many requests sent them so far
        self._lock = threading.Lock()
        self._in_flight = 0
        self._waited = 0.0  # seconds during which at least one of its requests was being answered
        self._since = 0.0  # when the current such stretch began (time.monotonic)

    def enter(self, limit: int) -> bool:
        """One more request being answered, unless `limit` already are (then False)."""
        with self._lock:
            if self._in_flight >= limit:
                return False
            if self._in_flight == 0:
                self._since = time.monotonic()
            self._in_flight += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._waited += time.monotonic() - self._since

    def waited(self, now: float) -> float:
        """Seconds the rollout has spent waiting for the policy's answers, up to `now` (time.monotonic)."""
        with self._lock:
            return self._waited + (now - self._since if self._in_flight else 0.0)

    def request_index(self, prompt_ids: list[int]) -> int:
        """k: how many earlier requests of this rollout sent these prompt ids (so a repeated request draws anew,
        and concurrent requests draw what they would in any order)."""
        with self._lock:
            key = tuple(prompt_ids)
            k = self._requests.get(key, 0)
            self._requests[key] = k + 1
            return k

    def add(self, turns: list[Turn]) -> None:
        with self._lock:
            self._turns.extend(turns)

    def remove(self, turns: list[Turn]) -> None:
        """Take back turns whose answer never reached the agent."""
        with self._lock:
            self._turns = [t for t in self._turns if not any(t is gone for gone in turns)]

    def reward(self, value: float) -> int:
        """`value` reported as the reward of the latest turn served (rewards reported for one turn add up); its
        number. ValueError: no turn was served yet."""
        with self._lock:
            if not self._turns:
                raise ValueError("no turn to reward yet: report a turn's reward after its call was answered")
            self._rewards.append((self._turns[-1], value))
            return len(self._turns) - 1

    @property
    def turn_rewards(self) -> dict[int, float]:
        """{turn number (its place in `turns`): the rewards reported for it, summed}."""
        with self._lock:
            numbers = {id(turn): k for k, turn in enumerate(self._turns)}
            out: dict[int, float] = {}
            for turn, value in self._rewards:
                if id(turn) in numbers:  # (a turn taken back takes its rewards with it)
                    out[numbers[id(turn)]] = out.get(numbers[id(turn)], 0.0) + value
            return out

    @property
    def turns(self) -> list[Turn]:
        with self._lock:
            return list(self._turns)
