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

import inspect
from collections.abc import Callable
from typing import Any, cast

from rlvr.errors import UserError
from rlvr.rewards.graders.build import SPEC_TYPES, VERIFIER_TYPES, build_grader, load_grader
from rlvr.rewards.graders.spec import did_you_mean
from rlvr.rewards.registry import ANSWER_CHECKS, BUILTIN_REWARDS, bind, require_sandbox
from rlvr.user_code import load_user_object

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


def checks_answers(spec: str) -> bool | None:
    """Whether the reward `spec` names says if an answer is right: True for the built-in verifiers
    (registry.ANSWER_CHECKS) and the grader types made of them, False for the other built-ins (format,
    shaping, reward model), None for what rlvr cannot tell: your own functions and grader specs.

    >>> [checks_answers(s) for s in ("sudoku", "math", "boxed_format", "format", "my.py:check", "g.yaml")]
    [True, True, False, False, None, None]
    """
    spec = spec.strip()
    if spec in BUILTIN_REWARDS:
        return spec in ANSWER_CHECKS
    if spec in VERIFIER_TYPES:
        return spec != "format"
    return None


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
        if not params:  # (a reward with a misspelt first argument, `completion`, reads as a factory)
            raise UserError(f"reward '{spec}' takes no `completions` argument ({e}): a reward is called as "
                            "f(completions, **columns), TRL's convention; a factory, with no required "
                            "arguments, returns one") from None
        raise UserError(f"reward factory '{spec}' cannot take params {sorted(params)}: {e} "
                        "(see its signature)") from None
    try:
        made = factory(**params)
    except Exception as e:  # the user's code failed
        raise UserError(f"reward factory '{spec}' raised {type(e).__name__}: {e} (fix its params)") from e
    if not callable(made) or is_factory(made):
        raise UserError(f"reward '{spec}' takes no `completions`, so it was called as a factory, and it returned "
                        f"{type(made).__name__}, not a reward function (a reward takes completions and **kwargs)")
    return cast(Callable[..., Any], made)


def _load(spec: str) -> Callable[..., Any]:
    if ":" not in spec:
        return _builtin(spec)
    return cast(Callable[..., Any], load_user_object(spec, "reward", "function",
                                                     "a function taking completions and returning a list of floats"))


def _builtin(name: str) -> Callable[..., Any]:
    if name in BUILTIN_REWARDS:
        return BUILTIN_REWARDS[name]
    graders = [*SPEC_TYPES, "multi", *VERIFIER_TYPES]
    hint = did_you_mean(name, [*BUILTIN_REWARDS, *graders])
    raise UserError(
        f"unknown reward '{name}'{hint} (built-ins: {', '.join(BUILTIN_REWARDS)}; grader types: "
        f"{', '.join(graders)}; or write 'module.path:function', 'path/to/file.py:function' or a grader spec file)"
    )
