"""Turn a reward name from the config into a function: the one loader of every reward.

The spellings a config's ``rewards:`` list (or ``rlvr grade --grader``) accepts:

- a built-in reward: ``math_accuracy`` (rlvr.rewards.registry);
- a grader type with its fields as parameters: ``{name: string_check, params: {reference: ..., operation: eq}}``,
  or a grader spec file, ``grader.yaml`` / ``grader.json`` (rlvr.rewards.graders);
- an importable module and a function in it: ``my_package.rewards:exact_match``;
- a Python file and a function in it: ``rewards/my_reward.py:exact_match``.

Any function with TRL's reward signature works unchanged (see rlvr.rewards.combine). Parameters from
the config (``load_reward_function("math_accuracy", timeout_s=5)``) are bound with functools.partial,
after checking that the function has a parameter of each name. A function that takes neither
``completions`` nor ``**kwargs`` is a reward factory (TRL's ``get_soft_overlong_punishment``, open-r1's
``get_cosine_scaled_reward``): it is called once with the parameters, and what it returns is the reward.
"""

from __future__ import annotations

import difflib
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
from rlvr.rewards.graders.build import SPEC_TYPES, VERIFIER_TYPES, build_grader, load_grader
from rlvr.rewards.graders.spec import did_you_mean
from rlvr.rewards.registry import BUILTIN_REWARDS, bind, require_sandbox

SPEC_SUFFIXES = (".yaml", ".yml", ".json")


def load_reward_function(spec: str, **params: Any) -> Callable[..., Any]:
    """The reward function named by `spec` (see the module docstring), with `params` bound.

    >>> load_reward_function("math_accuracy").__name__
    'math_accuracy'
    >>> load_reward_function("overlong_penalty", max_tokens=16, cache_tokens=4)(None, [[0] * 14])
    [-0.5]
    >>> load_reward_function("string_check", reference="{{ item.answer }}",
    ...                      operation="eq")(completions=["4"], answer=["4"])
    [1.0]
    >>> load_reward_function("math_acuracy")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: unknown reward 'math_acuracy'; did you mean 'math_accuracy'? ...
    """
    spec = spec.strip()
    if spec not in BUILTIN_REWARDS and (spec in SPEC_TYPES or spec in VERIFIER_TYPES or spec == "multi"):
        return build_grader({"type": spec, **params}, spec)  # (a built-in of the same name wins: countdown)
    if spec.endswith(SPEC_SUFFIXES):
        if params:
            raise UserError(f"reward '{spec}' is a grader spec file: give its settings in the file, not as params")
        return load_grader(spec)
    fn = _load(spec)
    if ":" in spec and is_factory(fn):
        fn = _made_by(fn, params, spec)
        params = {}
    require_sandbox(fn)
    return bind(fn, params, spec) if params else fn


def is_factory(fn: Callable[..., Any]) -> bool:
    """Whether `fn` makes reward functions rather than being one, like TRL's `get_soft_overlong_punishment`
    or open-r1's `get_cosine_scaled_reward`: it takes neither `completions` nor the columns (**kwargs).

    >>> def get_length_reward(scale=1.0):
    ...     return lambda completions, **kwargs: [scale * len(c) for c in completions]
    >>> is_factory(get_length_reward), is_factory(get_length_reward())
    (True, False)
    """
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no readable signature: call it as a reward
        return False
    return not any(p.name == "completions" or p.kind == p.VAR_KEYWORD for p in parameters)


def _made_by(factory: Callable[..., Any], params: dict[str, Any], spec: str) -> Callable[..., Any]:
    """The reward function `factory(**params)` returns; its mistakes are one line naming it."""
    try:
        inspect.signature(factory).bind(**params)
    except TypeError as e:
        raise UserError(f"reward factory '{spec}' cannot take params {sorted(params)}: {e} "
                        "(see its signature)") from None
    try:
        made = factory(**params)
    except Exception as e:  # the user's code failed
        raise UserError(f"reward factory '{spec}' raised {type(e).__name__}: {e} (fix its params)") from e
    if not callable(made) or is_factory(made):
        raise UserError(f"reward '{spec}' takes no `completions`, so it was called as a factory, and it returned "
                        f"{type(made).__name__}, not a reward function (a reward takes completions and **kwargs)")
    return made


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


def _builtin(name: str) -> Callable[..., Any]:
    if name in BUILTIN_REWARDS:
        return BUILTIN_REWARDS[name]
    graders = [*SPEC_TYPES, "multi", *VERIFIER_TYPES]
    hint = did_you_mean(name, [*BUILTIN_REWARDS, *graders])
    raise UserError(
        f"unknown reward '{name}'{hint} (built-ins: {', '.join(BUILTIN_REWARDS)}; grader types: "
        f"{', '.join(graders)}; or write 'module.path:function', 'path/to/file.py:function' or a grader spec file)"
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
