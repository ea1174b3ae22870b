"""Turn a reward name from the config into a function.

Three spellings, as in a config's ``rewards:`` list:

- a built-in name: ``math_accuracy`` (see BUILTIN_REWARDS);
- an importable module and a function in it: ``my_package.rewards:exact_match``;
- a Python file and a function in it: ``rewards/my_reward.py:exact_match``.

Any function with TRL's reward signature works unchanged (see rlvr.rewards.combine).

Parameters from the config (``load_reward_function("math_accuracy", timeout_s=5)``) are bound with
functools.partial, after checking that the function has a parameter of each name.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.reward_model import reward_model
from rlvr.rewards.code import code_continuation_all, code_tests, code_tests_all
from rlvr.rewards.countdown import countdown
from rlvr.rewards.format import boxed_format, soft_think_answer_format, think_answer_format
from rlvr.rewards.language import language_consistency
from rlvr.rewards.math import math_accuracy, math_accuracy_lenient
from rlvr.rewards.puzzles import sudoku
from rlvr.rewards.shaping import overlong_penalty

BUILTIN_REWARDS: dict[str, Callable[..., list[float | None]]] = {
    "math_accuracy": math_accuracy,
    "math_accuracy_lenient": math_accuracy_lenient,
    "boxed_format": boxed_format,
    "think_answer_format": think_answer_format,
    "soft_think_answer_format": soft_think_answer_format,
    "countdown": countdown,  # also the 24 game: a countdown row with target 24
    "sudoku": sudoku,
    "language_consistency": language_consistency,
    "overlong_penalty": overlong_penalty,
    "reward_model": reward_model,  # a trained reward model, normalised (rlvr.reward_models)
    "code_tests": code_tests,
    "code_tests_all": code_tests_all,
    "code_continuation_all": code_continuation_all,
}
# Filled in by the caller on every call, never bound as parameters.
TRL_ARGUMENTS = ("prompts", "completions", "completion_ids")


def load_reward_function(spec: str, **params: Any) -> Callable[..., Any]:
    """The reward function named by `spec` (built-in, ``module:function`` or ``file.py:function``),
    with `params` bound.

    >>> load_reward_function("math_accuracy").__name__
    'math_accuracy'
    >>> load_reward_function("overlong_penalty", max_tokens=16, cache_tokens=4)(None, [[0] * 14])
    [-0.5]
    >>> load_reward_function("math_acuracy")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: unknown reward 'math_acuracy'; did you mean 'math_accuracy'? ...
    """
    spec = spec.strip()
    fn = _load(spec)
    return _with_params(fn, params, spec) if params else fn


def _load(spec: str) -> Callable[..., Any]:
    if ":" not in spec:
        return _builtin(spec)
    # rpartition: a Windows path "C:\\r.py:f" has its last colon before the function name.
    source, _, attribute = spec.rpartition(":")
    if not source or not attribute:
        raise UserError(f"reward '{spec}' is not 'module:function' or 'path/to/file.py:function'")
    is_file = source.endswith(".py") or "/" in source or "\\" in source
    module = _module_from_file(source, spec) if is_file else _module_from_import(source, spec)
    return _function(module, source, attribute, spec)


def _with_params(fn: Callable[..., Any], params: dict[str, Any], spec: str) -> Callable[..., Any]:
    """`fn` with `params` bound by keyword; a UserError names a parameter `fn` does not take."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins and C functions have no readable signature
        raise UserError(f"reward '{spec}': cannot read its parameters, so it cannot take {sorted(params)}") from None
    # A **kwargs catch-all receives the dataset columns: a name must be spelled out to be a parameter.
    named = [
        name for name, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name not in TRL_ARGUMENTS
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


def _builtin(name: str) -> Callable[..., Any]:
    if name in BUILTIN_REWARDS:
        return BUILTIN_REWARDS[name]
    close = difflib.get_close_matches(name, BUILTIN_REWARDS, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise UserError(
        f"unknown reward '{name}'{hint} (built-ins: {', '.join(BUILTIN_REWARDS)}; "
        "or write 'module.path:function' or 'path/to/file.py:function')"
    )


def _module_from_import(module_name: str, spec: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ImportError as e:
        raise UserError(
            f"reward '{spec}': cannot import module '{module_name}' ({e}); "
            "check the spelling and that its folder is on PYTHONPATH"
        ) from e
    except Exception as e:  # the module's own top-level code failed: the user's bug, not ours
        raise UserError(
            f"reward '{spec}': importing module '{module_name}' raised {type(e).__name__}: {e} "
            "(fix that module)"
        ) from e


def _module_from_file(path_text: str, spec: str) -> ModuleType:
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise UserError(f"reward '{spec}': file '{path_text}' not found (give the path of a .py file)")
    # A name unique to the path, so two reward files both called rewards.py do not collide.
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    name = f"rlvr_user_reward_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise UserError(f"reward '{spec}': cannot load '{path_text}' as Python (give a .py file)")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # registered before running, as `import` does, for dataclasses and pickle
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:  # the file's own top-level code failed: the user's bug, not ours
        del sys.modules[name]
        raise UserError(
            f"reward '{spec}': importing file '{path_text}' raised {type(e).__name__}: {e} (fix that file)"
        ) from e
    return module


def _function(module: ModuleType, source: str, attribute: str, spec: str) -> Callable[..., Any]:
    if not hasattr(module, attribute):
        public = [n for n in vars(module) if not n.startswith("_") and callable(getattr(module, n))]
        close = difflib.get_close_matches(attribute, public, n=1)
        hint = f"did you mean '{close[0]}'?" if close else "check the function name"
        raise UserError(f"reward '{spec}': '{source}' has no attribute '{attribute}' ({hint})")
    fn = getattr(module, attribute)
    if not callable(fn):
        raise UserError(
            f"reward '{spec}': '{source}:{attribute}' is a {type(fn).__name__}, not a function "
            "(point at a function taking completions and returning a list of floats)"
        )
    return fn
