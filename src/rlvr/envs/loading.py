"""An environment from a config's name: a built-in, `module.path:Class` or `path/to/file.py:Class`,
built with the config's parameters (one object per trajectory). A built-in that runs model-written code
is refused here, when the run is built, on a machine without a sandbox (as code rewards are)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from rlvr.envs.base import Environment
from rlvr.envs.function_tools import FunctionTools
from rlvr.envs.guess import GuessNumber
from rlvr.envs.mcp_tools import is_mcp, mcp_factory
from rlvr.envs.openenv import class_factory, is_openenv, is_openenv_class, openenv_factory
from rlvr.envs.python_tool import PythonTool
from rlvr.errors import UserError
from rlvr.sandbox import isolation
from rlvr.user_code import load_user_object

ENVIRONMENTS: dict[str, Callable[..., Environment]] = {"python_tool": PythonTool, "guess_number": GuessNumber,
                                                      "tools": FunctionTools}
SANDBOXED = (PythonTool,)
"""The built-ins that run model-written code: refused when loaded without a sandbox (rlvr.sandbox)."""
STATELESS = (FunctionTools,)
"""The built-ins that keep nothing between calls: built once when loaded (a mistake is told before the first step),
the one object serving every trajectory."""


def load_agent(spec: str | None, params: dict[str, Any] | None = None) -> Any:
    """What runs harness rollouts (rlvr.harness) for `spec`: the agent function it names (`file.py:fn`, `module:fn`,
    or from Python the function itself), `fn(link, row)`, which runs its own loop against the policy's endpoint;
    a verifiers environment (`verifiers:<module>`, built with `params`) as its adapter; None when `spec` names an
    environment rlvr drives (a built-in or a class), or none (a single-turn run)."""
    from rlvr.adapters import verifiers_env

    if not spec:
        return None
    if verifiers_env.is_verifiers(spec):
        env = verifiers_env.load(spec, params) if isinstance(spec, str) else spec
        return verifiers_env.VerifiersAgent(env, spec if isinstance(spec, str) else type(env).__name__)
    if ":" not in spec or is_openenv(spec) or is_mcp(spec):
        return None
    found = load_user_object(spec, "environment", "class", "a class with reset(row, messages, seed) and step(text) "
                             "methods, or an agent function fn(link, row)")
    if inspect.isclass(found):
        return None
    if verifiers_env.is_verifiers(found):  # (a loaded verifiers environment, given from Python)
        return verifiers_env.VerifiersAgent(found, type(found).__name__)
    try:
        inspect.signature(found).bind(None, None)
    except TypeError:
        raise UserError(f"environment '{spec}' is a function that cannot be called as fn(link, row): an agent "
                        f"function takes the rollout's link to the policy and its dataset row (it takes "
                        f"{inspect.signature(found)})") from None
    except ValueError:  # (no signature to read: a builtin; called as it is)
        pass
    return found


def load_environment(spec: str, **params: Any) -> Callable[[], Environment]:
    """A factory of fresh environments named by `spec`, with `params` checked against its constructor.

    >>> make = load_environment("guess_number", max_turns=3)
    >>> make().max_turns
    3
    >>> load_environment("gues_number")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    rlvr.errors.UserError: unknown environment 'gues_number' (did you mean 'guess_number'?...
    """
    if is_openenv(spec):
        return openenv_factory(spec, **params)
    if is_mcp(spec):
        return mcp_factory(spec, **params)
    if ":" in spec:
        cls = load_user_object(spec, "environment", "class",
                               "a class with reset(row, messages, seed) and step(text) methods")
    elif spec in ENVIRONMENTS:
        cls = ENVIRONMENTS[spec]
    else:
        import difflib

        close = difflib.get_close_matches(spec, list(ENVIRONMENTS), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise UserError(f"unknown environment '{spec}'{hint}; built-ins: {', '.join(ENVIRONMENTS)}, or "
                        "'module.path:Class' / 'path/to/file.py:Class'")
    if is_openenv_class(cls):  # (an OpenEnv environment given from Python, or named without openenv:)
        return class_factory(cls, spec, params)
    missing = [m for m in ("reset", "step") if not callable(getattr(cls, m, None))]
    if missing:
        raise UserError(f"environment '{spec}' has no {' or '.join(missing)} method "
                        "(an environment has reset(row, messages, seed) and step(text))")
    try:
        inspect.signature(cls).bind(**params)
    except TypeError as e:
        raise UserError(f"environment '{spec}': its parameters do not fit ({e}); "
                        f"it takes {inspect.signature(cls)}") from None
    if cls in SANDBOXED:
        isolation()  # no bubblewrap and no RLVR_SANDBOX=unisolated: one line with the fix, before any step
    if cls in STATELESS:
        built = cls(**params)
        return lambda: built
    return lambda: cls(**params)
