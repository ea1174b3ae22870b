"""Harness rollouts: G runs of an agent function against the endpoint, each its own rollout, with a deadline.

`fn(link, row)` (a plain or an `async` function) runs any agent loop: `link.base_url` and `link.api_key` are what
an `openai.OpenAI` client takes (`link.openai()` makes one), `link.chat(messages, **params)` posts one request
without it; `row` is the dataset row. It returns the rollout's reward: a float, None (unscored), or
(reward, {metric: value}). Its G runs go on worker threads that nobody joins (rlvr.deadline.DaemonPool): one
past `timeout_s` of its own time (the time it waited for the policy's answers, which the whole step's decoding
shares, is not counted) is unscored, its key revoked (a later call is refused, 410), and the group goes on. One that
raises is unscored, with its error kept. The turns each run was served become its training rows
(rlvr.harness.rows). `link.reward(value)` reports a reward for the latest turn (kept with it: `turn_rewards`); a
run that reported some and returned None has reward 0 at its end.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, TimeoutError, wait
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlvr.deadline import DaemonPool
from rlvr.errors import UserError, first_line
from rlvr.harness.endpoint import REWARD_ROUTE, Endpoint, RolloutKey
from rlvr.harness.request import TRAIN_FIELD, TRAIN_HEADER
from rlvr.harness.rows import Segment, segments


@dataclass(frozen=True)
class Link:
    """What an agent is given to reach the policy: one rollout's base URL and key."""

    base_url: str
    api_key: str

    def openai(self, train: bool = True) -> Any:
        """An `openai.OpenAI` client on this rollout (`pip install openai`), without retries (a retry is a new draw);
        `train=False`: its calls are served but not trained (an auxiliary client: titles, summaries, a judge)."""
        try:
            from openai import OpenAI
        except ImportError:
            raise UserError("link.openai() needs the openai package: pip install openai "
                            "(or post with link.chat)") from None
        headers = {} if train else {TRAIN_HEADER: "false"}
        return OpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0, default_headers=headers)

    def anthropic(self, train: bool = True) -> Any:
        """An `anthropic.Anthropic` client on this rollout (`pip install anthropic`; it appends /v1/messages to its
        base URL), without retries; `train=False`: its calls are served but not trained."""
        try:
            from anthropic import Anthropic
        except ImportError:
            raise UserError("link.anthropic() needs the anthropic package: pip install anthropic") from None
        headers = {} if train else {TRAIN_HEADER: "false"}
        return Anthropic(base_url=self.base_url.removesuffix("/v1"), api_key=self.api_key, max_retries=0,
                         default_headers=headers)

    def chat(self, messages: list[dict[str, Any]], timeout_s: float = 600.0, train: bool = True,
             **params: Any) -> dict[str, Any]:
        """One chat completion (the JSON answer) without the openai package; `train=False`: served, not trained."""
        return self._post("chat/completions", {"messages": messages, **params,
                                               **({} if train else {TRAIN_FIELD: False})}, timeout_s)

    def reward(self, value: float, timeout_s: float = 60.0) -> int:
        """Report `value` as the reward of the latest turn this rollout was served (a game's points, a test run
        after an edit; several for one turn add up); the turn's number. What is reported is added to the rollout's
        reward, and `algorithm.turn_advantages: per_turn` gives each turn credit for the rewards from it on
        (docs/environments.md). Any HTTP client can do the same: POST {"reward": value} to <base_url>/rlvr/reward."""
        return int(self._post(REWARD_ROUTE, {"reward": value}, timeout_s)["turn"])

    def _post(self, route: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        request = urllib.request.Request(f"{self.base_url}/{route}", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {self.api_key}"})
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]


@dataclass
class HarnessRollout:
    """One run of the agent: its training rows, its reward (None: unscored), its metrics and what went wrong."""

    rows: list[Segment]
    reward: float | None
    metrics: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    turns: int = 0  # completions it was served (and saw)
    tool_parse_errors: int = 0  # tool calls in the model's messages that could not be read
    overridden: int = 0  # requests served at the run's sampling values or budget, not those they asked
    untrained: int = 0  # completions it was served on calls it marked as not trained (in no row)
    turn_rewards: dict[int, float] = field(default_factory=dict)  # turn number: the reward the agent reported for it


class Agent(Protocol):
    """What runs a rollout against the endpoint and scores a group of them: an agent function (`FunctionAgent`), or
    an adapter (rlvr.adapters.verifiers_env). `run` returns the run's outcome. `score` turns the outcomes of one
    row's runs (None where a run failed) into (reward, metrics) each, a reward of None leaving that run unscored;
    a UserError from it leaves the whole group unscored, with its message."""

    name: str

    def run(self, link: Link, row: dict[str, Any]) -> Any: ...
    def score(self, row: dict[str, Any], outcomes: list[Any]) -> list[tuple[float | None, dict[str, float]]]: ...


@dataclass
class FunctionAgent:
    """An agent function `fn(link, row)` (plain or async) returning its run's reward (see the module docstring)."""

    fn: Callable[..., Any]
    name: str = "the agent function"

    def run(self, link: Link, row: dict[str, Any]) -> Any:
        returned = asyncio.run(self.fn(link, row)) if inspect.iscoroutinefunction(self.fn) else self.fn(link, row)
        return _scored(returned, self.name)

    def score(self, row: dict[str, Any], outcomes: list[Any]) -> list[tuple[float | None, dict[str, float]]]:
        return [(None, {}) if o is None else o for o in outcomes]


def run_group(endpoint: Endpoint, fn: Callable[..., Any] | Agent, row: dict[str, Any], seeds: list[int],
              timeout_s: float, name: str = "the agent function") -> list[HarnessRollout]:
    """The len(seeds) rollouts of `row`, run together, each drawing from its seed (see the module docstring)."""
    return run_rollouts(endpoint, fn, [(row, seed) for seed in seeds], max(1, len(seeds)), timeout_s, name)


def run_rollouts(endpoint: Endpoint, agent: Callable[..., Any] | Agent, jobs: list[tuple[dict[str, Any], int]],
                 group_size: int, timeout_s: float, name: str = "the agent function") -> list[HarnessRollout]:
    """One rollout per (row, seed) of `jobs`, all run together (their requests decode in batches), under one
    deadline of `timeout_s` from now (0: none); each `group_size` consecutive jobs (one row's) scored together."""
    runner: Agent = FunctionAgent(agent, name) if not hasattr(agent, "score") else agent  # type: ignore[assignment]
    keys = [endpoint.open(seed) for _, seed in jobs]
    pool = DaemonPool(max(1, len(keys)))
    run = _guarded(runner.run, runner.name)
    futures: list[Future[Any]] = [pool.submit(run, Link(k.base_url, k.key), row) for k, (row, _) in zip(keys, jobs)]
    pool.close()
    late = _overtime(futures, keys, timeout_s)
    outcomes: list[Any] = []
    errors: list[str | None] = []
    fatal: _AgentExit | None = None
    for future, over in zip(futures, late):
        outcome, error = None, None
        try:
            if over:
                raise TimeoutError
            outcome = future.result()
        except TimeoutError:
            error = (f"{runner.name} did not return within environment.timeout_s={timeout_s:g} s of its own time "
                     "(the time it waited for the policy's answers not counted)")
        except _AgentExit as e:  # it asked to end the process: the step stops, once every run's key is closed
            fatal = fatal or e
        except UserError as e:
            error = str(e)
        except Exception as e:  # the agent's own failure: this rollout is unscored, the others go on
            error = f"{runner.name} raised {type(e).__name__}: {first_line(e)}"
        outcomes.append(outcome)
        errors.append(error)
    turns = [endpoint.finish(key.key) for key in keys]
    if fatal is not None:
        raise UserError(str(fatal))
    for t, served in enumerate(turns):  # (nothing it was served: nothing to train on, so no reward either)
        if not served and errors[t] is None:
            errors[t] = f"{runner.name} never called the endpoint: nothing to train on"
    scored: list[tuple[float | None, dict[str, float]]] = []
    for start in range(0, len(jobs), group_size):
        part = slice(start, start + group_size)
        try:
            scored += runner.score(jobs[start][0], [None if e else o for o, e in zip(outcomes[part], errors[part])])
        except UserError as e:
            errors[part] = [error or str(e) for error in errors[part]]
            scored += [(None, {})] * len(outcomes[part])
    out = []
    for served, (reward, metrics), error, key in zip(turns, scored, errors, keys):
        rewarded = key.recorder.turn_rewards
        if rewarded and reward is None:  # (it reported its turns' rewards and returned none: the end adds nothing)
            reward = 0.0
        out.append(HarnessRollout(segments(served), None if error else reward, metrics, error, len(served),
                                  key.recorder.tool_parse_errors, key.recorder.overridden,
                                  sum(not turn.trained for turn in served), rewarded))
    return out


class _AgentExit(UserError):
    """An agent called sys.exit, or raised KeyboardInterrupt itself (on its own thread: no signal of the run's)."""


def _guarded(run: Callable[[Link, dict[str, Any]], Any], name: str) -> Callable[[Link, dict[str, Any]], Any]:
    """`run` with sys.exit and a KeyboardInterrupt of its own turned into one line (the user-function contract,
    rlvr.deadline.call_user), which ends the step like a reward's, rather than the process."""
    fix = "a run is stopped by Ctrl-C, not by its functions: return the reward, or raise an exception"

    def guarded(link: Link, row: dict[str, Any]) -> Any:
        try:
            return run(link, row)
        except SystemExit as e:
            raise _AgentExit(f"{name} called sys.exit({e.code!r}) ({fix})") from None
        except KeyboardInterrupt:
            raise _AgentExit(f"{name} raised KeyboardInterrupt itself ({fix})") from None

    return guarded


def _overtime(futures: list[Future[Any]], keys: list[RolloutKey], timeout_s: float) -> list[bool]:
    """Wait for the runs; which ones ran past `timeout_s` (0: no limit) of their own time: the time since they
    started less what they spent waiting for the policy's answers, which the whole step's decoding shares."""
    start, over = time.monotonic(), [False] * len(futures)
    pending = set(range(len(futures)))
    while pending:
        wait([futures[i] for i in pending], timeout=0.25 if timeout_s else None, return_when=FIRST_COMPLETED)
        now = time.monotonic()
        for i in list(pending):
            if futures[i].done():
                pending.discard(i)
            elif timeout_s and now - start - keys[i].recorder.waited(now) > timeout_s:
                over[i] = True
                pending.discard(i)
    return over


def _scored(returned: Any, name: str) -> tuple[float | None, dict[str, float]]:
    """(reward, metrics) of what the agent function returned; None and NaN are unscored."""
    reward, metrics = returned if isinstance(returned, tuple) and len(returned) == 2 else (returned, {})
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
        raise UserError(f"{name} returned {type(reward).__name__} {reward!r}: return the rollout's reward as a float "
                        "(None: unscored), or (reward, {metric: value})")
    if not isinstance(metrics, dict):
        raise UserError(f"{name} returned metrics of type {type(metrics).__name__}: give them as {{name: number}}")
    value = None if reward is None or math.isnan(reward) else float(reward)
    return value, {str(k): float(v) for k, v in metrics.items()}
