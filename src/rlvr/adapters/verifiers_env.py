"""verifiers environments, unchanged (prime-rl's `verifiers`, classic API: 0.3.x's SingleTurnEnv, MultiTurnEnv, ToolEnv
and the Rubric they are scored by).

    environment.name: verifiers:<module>[?arg=value&...]     vf.load_environment(module, **args)
    environment.name: verifiers:path/to/env.py[?...]          that file's load_environment(**args)
    from Python: the loaded environment object itself         rlvr.GRPO(..., environment=env)

Each rollout is the environment's own `rollout(input, client, model, sampling_args)` (its own sampling_args, as
verifiers' generate() passes them, held to the endpoint's rule: rlvr.harness.request), its client a verifiers
`OpenAIChatCompletionsClient` over the rollout's endpoint URL (rlvr.harness.endpoint), so every model call is a
recorded draw of the policy; the G runs of a row are then scored together by the environment's rubric
(`score_group`: weighted reward functions, group reward functions, metrics), as verifiers' own `run_group` does.
The rubric's reward is the run's reward (the `agent_reward` reward), its metrics are logged as env/<name>.

Where verifiers would score 0 and go on, rlvr does not count a score: a rollout whose state holds an error is
unscored, and so is a group in which a reward function raised (verifiers logs the exception and writes 0.0;
rlvr names it in one line instead and leaves the group out of the loss).

The environment's dataset is the run's training data when `data.train` names the same `verifiers:` source
(rlvr.data.sources), its eval_dataset the held-out rows.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import inspect
import json
import math
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import yaml

from rlvr.errors import UserError, first_line

PREFIX = "verifiers:"
SUPPORTED = ("0.3.1",)  # the classic API (0.4.0 replaced it with verifiers.v1)
_loaded: dict[str, Any] = {}
_said: set[str] = set()


def is_verifiers(spec: Any) -> bool:
    """Whether an environment or data source names a verifiers environment (or is one, from Python)."""
    return (isinstance(spec, str) and spec.startswith(PREFIX)) or _is_environment(spec)


def load(spec: str, params: dict[str, Any] | None = None) -> Any:
    """The verifiers environment `spec` names (loaded once per process for the same spec and arguments)."""
    vf = _verifiers()
    name, _, query = spec.removeprefix(PREFIX).partition("?")
    from rlvr.user_code import registered

    if _is_environment(given := registered(name)):  # (an environment object given from Python)
        return given
    try:
        args = {k: yaml.safe_load(v) if v else None for k, v in parse_qsl(query, keep_blank_values=True,
                                                                          strict_parsing=bool(query))}
    except ValueError:
        raise UserError(f"environment {spec!r}: arguments go after '?' as name=value pairs joined by '&', such as "
                        f"{PREFIX}{name}?num_examples=100") from None
    args |= params or {}
    key = json.dumps([name, sorted(args.items())], default=str)
    if key not in _loaded:
        _loaded[key] = _load(vf, name.strip(), args, spec)
    return _loaded[key]


def _load(vf: Any, name: str, args: dict[str, Any], spec: str) -> Any:
    if name.endswith(".py"):
        from rlvr.user_code import load_user_object

        make = load_user_object(f"{name}:load_environment", "verifiers environment", "function",
                                "a verifiers environment module with load_environment(**args)")
    else:
        make = functools.partial(vf.load_environment, name)
    handlers = _signal_handlers()
    try:
        env = make(**args)
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"environment {spec!r}: loading it raised {type(e).__name__}: {first_line(e)} (is the "
                        f"module installed, with load_environment({', '.join(args)})?)") from None
    finally:
        _restore(handlers)
    if not _is_environment(env):
        raise UserError(f"environment {spec!r}: load_environment returned a {type(env).__name__}, not a verifiers "
                        "Environment")
    return env


def _signal_handlers() -> dict[int, Any]:
    """This process's Ctrl-C and SIGTERM handlers (the main thread's to set): a verifiers Environment replaces
    them when it is built (SIGTERM then exits at once, 143), and rlvr's own say what a stop saves."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}


def _restore(handlers: dict[int, Any]) -> None:
    for signum, handler in handlers.items():
        if handler is not None:
            signal.signal(signum, handler)


def _verifiers() -> Any:
    try:
        import verifiers as vf
    except ImportError:
        raise UserError("verifiers environments need the verifiers package: pip install 'verifiers==0.3.1'") from None
    version = getattr(vf, "__version__", "?")
    if not hasattr(vf, "Environment"):  # (0.4.0 ships only verifiers.v1: Tasksets run by harness programs)
        raise UserError(f"verifiers {version} is installed, whose v1 Taskset/Harness API rlvr does not train (its "
                        "harnesses are programs that uv installs from the network when a run starts); rlvr trains "
                        "verifiers' classic environments: pip install 'verifiers==0.3.1'")
    if version not in SUPPORTED and "version" not in _said:
        _said.add("version")
        print(f"rlvr: verifiers {version} is installed; rlvr supports verifiers {', '.join(SUPPORTED)} (its classic "
              "Environment API): if something fails, pip install 'verifiers==0.3.1'", file=sys.stderr)
    return vf


def _is_environment(obj: Any) -> bool:
    vf = sys.modules.get("verifiers")
    return vf is not None and isinstance(obj, getattr(vf, "Environment", ()))


def rows(env: Any, split: str) -> list[dict[str, Any]]:
    """The environment's own dataset rows (`train`: its dataset; `test`: its eval_dataset, else none), each with
    its chat `prompt`, `answer`, `info` and `example_id` as verifiers formatted them."""
    dataset = env.get_dataset() if split == "train" else (env.get_eval_dataset() if env.eval_dataset is not None
                                                          else None)
    return [] if dataset is None else [dict(row) for row in dataset]


class VerifiersAgent:
    """A verifiers Environment as rlvr's harness runs it (see the module docstring)."""

    def __init__(self, env: Any, name: str) -> None:
        self.env, self.name = env, f"verifiers environment '{name}'"
        # its own sampling_args, as verifiers' generate() passes them: the endpoint holds them to its rule
        # (rlvr.harness.request: another temperature served at the run's, counted and said; JSON mode refused)
        self.sampling_args = copy.deepcopy(getattr(env, "sampling_args", None) or {})
        if not hasattr(env, "_rlvr_watched"):  # (its reward functions watched once, however many agents it gets)
            env._rlvr_watched = True
            for rubric in _rubrics(env.rubric):
                rubric.funcs = [_watched(f) for f in rubric.funcs]

    def run(self, link: Any, row: dict[str, Any]) -> Any:
        from openai import AsyncOpenAI

        vf = _verifiers()

        async def rollout() -> Any:
            openai = AsyncOpenAI(base_url=link.base_url, api_key=link.api_key, max_retries=0)
            try:
                client = vf.OpenAIChatCompletionsClient(openai)
                return await self.env.rollout(_rollout_input(row), client, "policy", self.sampling_args)
            finally:
                await openai.close()

        state = _on_the_loop(rollout())
        error = state.get("error")
        if error is not None:
            while error.__cause__ is not None and not str(error).strip():  # (verifiers' bare `raise ModelError from e`)
                error = error.__cause__
            raise UserError(f"{self.name}'s rollout ended with an error: {type(error).__name__}: {first_line(error)}")
        return state

    def score(self, row: dict[str, Any], outcomes: list[Any]) -> list[tuple[float | None, dict[str, float]]]:
        states = [s for s in outcomes if s is not None]
        if states:
            async def score_group() -> list[str]:
                raised = _RAISED.set([])  # (the tasks score_group starts share this list: their context's copy)
                try:
                    await self.env.rubric.score_group(states)
                    return _RAISED.get()
                finally:
                    _RAISED.reset(raised)
            try:
                raised = _on_the_loop(score_group())
            except Exception as e:  # (outside verifiers' own guard: a group function's list of the wrong length)
                raise UserError(f"{self.name}: its rubric's score_group raised {type(e).__name__}: {first_line(e)} "
                                "(the group is unscored)") from None
            if raised:
                raise UserError(f"{self.name}: reward function {raised[0]} (the group is unscored: verifiers "
                                "would have scored it 0.0)")
        return [(None, {}) if s is None else (_number(s.get("reward")), _metrics(s.get("metrics")))
                for s in outcomes]


# The reward functions' exceptions during one group's scoring (verifiers catches them and writes 0.0).
_RAISED: contextvars.ContextVar[list[str]] = contextvars.ContextVar("rlvr_verifiers_raised")


def _watched(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, noting an exception before verifiers turns it into a score of 0.0 (its signature kept)."""
    def note(e: Exception) -> None:
        if (raised := _RAISED.get(None)) is not None:
            raised.append(f"{getattr(fn, '__name__', fn)!s} raised {type(e).__name__}: {first_line(e)}")

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def watched_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except Exception as e:
                note(e)
                raise
        return watched_async

    @functools.wraps(fn)
    def watched(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            note(e)
            raise
    return watched


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _on_the_loop(coroutine: Any) -> Any:
    """`coroutine`'s result, run on the one event loop every verifiers rollout and rubric of this process runs on
    (a thread of its own), as verifiers runs them: objects an environment shares, such as a JudgeRubric's
    AsyncOpenAI client, belong to the loop they were first used on and fail on any other."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="rlvr-verifiers-loop", daemon=True).start()
    return asyncio.run_coroutine_threadsafe(coroutine, _loop).result()


def _rubrics(rubric: Any) -> list[Any]:
    """A rubric and, for a RubricGroup, the rubrics it holds."""
    inner = getattr(rubric, "rubrics", None)
    return [r for part in inner for r in _rubrics(part)] if inner else [rubric]


def _rollout_input(row: dict[str, Any]) -> dict[str, Any]:
    """What verifiers' rollout takes of a dataset row (its own columns, as its dataset formatted them)."""
    keep = {k: row[k] for k in ("prompt", "example_id", "answer", "info") if row.get(k) is not None}
    keep.setdefault("example_id", 0)
    return keep


def _number(value: Any) -> float | None:
    return None if value is None or not isinstance(value, (int, float)) or math.isnan(value) else float(value)


def _metrics(metrics: Any) -> dict[str, float]:
    return {str(k): float(v) for k, v in (metrics or {}).items() if isinstance(v, (int, float))}
