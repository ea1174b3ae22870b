"""The built-in rewards by name: what a config's `rewards: [{name: ...}]` and a grader spec's `type:` find.

Every entry has TRL's signature, ``fn(prompts=, completions=, completion_ids=, **columns)``, and
returns one float (or None) per completion; the verifiers return `Scores` with a reason for each.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.code import code_continuation_all, code_tests, code_tests_all
from rlvr.rewards.countdown import countdown
from rlvr.rewards.format import boxed_format, soft_think_answer_format, think_answer_format
from rlvr.rewards.gym import reasoning_gym, reasoning_gym_solved
from rlvr.rewards.language import language_consistency
from rlvr.rewards.math import math_accuracy, math_accuracy_lenient
from rlvr.rewards.puzzles import sudoku
from rlvr.rewards.reward_model import reward_model
from rlvr.rewards.scores import TRL_KEYWORDS
from rlvr.rewards.shaping import agent_passed, agent_reward, environment_reward, overlong_penalty
from rlvr.sandbox import isolation

BUILTIN_REWARDS: dict[str, Callable[..., Any]] = {
    "math_accuracy": math_accuracy,
    "math_accuracy_lenient": math_accuracy_lenient,
    "boxed_format": boxed_format,
    "think_answer_format": think_answer_format,
    "soft_think_answer_format": soft_think_answer_format,
    "countdown": countdown,  # also the 24 game: a countdown row with target 24
    "sudoku": sudoku,
    "reasoning_gym": reasoning_gym,  # a reasoning-gym task's own scorer, partial credit kept (rlvr.rewards.gym)
    "reasoning_gym_solved": reasoning_gym_solved,
    "language_consistency": language_consistency,
    "overlong_penalty": overlong_penalty,
    "environment_reward": environment_reward,  # what a multi-turn rollout's environment scored (rlvr.envs)
    "agent_reward": agent_reward,  # what a harness rollout's agent function returned (rlvr.harness)
    "agent_passed": agent_passed,  # that reward reaching a threshold: rlvr eval's verdict on a verifiers environment
    "reward_model": reward_model,  # a trained reward model, normalised (rlvr.rewards.reward_model)
    "code_tests": code_tests,
    "code_tests_all": code_tests_all,
    "code_continuation_all": code_continuation_all,
}


ANSWER_CHECKS = ("math_accuracy", "math_accuracy_lenient", "countdown", "sudoku", "reasoning_gym",
                 "reasoning_gym_solved", "code_tests", "code_tests_all", "code_continuation_all")
"""The built-ins that say whether the answer is right: the correctness reward of a run that lists one
(logged as `accuracy`, followed by the curriculum) without being told. The others score the form
(boxed_format, ...), the length, the language, a preference (reward_model), or pass on the environment's
score (environment_reward, which only a run that knows its environment can call correctness)."""
PASSED_ON = ("environment_reward", "agent_reward", "agent_passed")
"""The built-ins that pass on a score made elsewhere: correctness only when a config says so."""


SANDBOXED = (code_tests, code_tests_all, code_continuation_all)
"""The built-ins that run model-written code: refused at build time without a sandbox (rlvr.sandbox)."""


def require_sandbox(fn: Callable[..., Any]) -> None:
    """A UserError saying how to get a sandbox when `fn` runs model-written code and none is available
    (and the user has not opted in to running it unisolated)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if any(fn is sandboxed for sandboxed in SANDBOXED):
        isolation()


def is_builtin(fn: Callable[..., Any]) -> bool:
    """Whether `fn` is one of the built-in rewards (maybe with parameters bound): they are thread-safe."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return any(fn is builtin for builtin in BUILTIN_REWARDS.values())


def required_columns(fn: Callable[..., Any]) -> list[str]:
    """The dataset columns `fn` cannot be called without: its parameters that take a keyword, have no
    default and are not one of TRL's own (prompts, completions, completion_ids). Parameters bound from the
    config have defaults then; a column read from **kwargs is not required (it may be optional).

    >>> def check(prompts, completions, answer, level=1, **kwargs): ...
    >>> required_columns(check), required_columns(functools.partial(check, answer="4"))
    (['answer'], [])
    """
    try:
        signature = inspect.signature(fn)  # (follows functools.wraps to the function a router wraps)
    except (TypeError, ValueError):  # no readable signature: nothing can be told
        return []
    return [name for name, p in signature.parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
            and name not in TRL_KEYWORDS]


def bind(fn: Callable[..., Any], params: dict[str, Any], spec: str) -> Callable[..., Any]:
    """`fn` with `params` bound by keyword; a UserError names a parameter `fn` does not take."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins and C functions have no readable signature
        raise UserError(f"reward '{spec}': cannot read its parameters, so it cannot take {sorted(params)}") from None
    # A **kwargs catch-all receives the dataset columns: a name must be spelled out to be a parameter.
    named = [
        name for name, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name not in TRL_KEYWORDS
    ]
    for name in params:
        if name not in named:
            close = difflib.get_close_matches(name, named, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise UserError(
                f"reward '{spec}' has no parameter '{name}'; {hint}its parameters: {', '.join(named) or 'none'}"
            )
    bound = functools.partial(fn, **params)
    return functools.update_wrapper(bound, fn)  # keeps __name__ and the docstring for logs and help
