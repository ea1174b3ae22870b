"""From a spec to a reward function: the one table of grader types, over the reward registry.

    type: string_check | text_similarity | python | score_model | label_model | multi   rewards built from the spec
    type: math | code | countdown | format                                              the built-in verifiers, by the
                                                                                        names OpenAI's graders use
    type: <any built-in reward>, e.g. math_accuracy_lenient or overlong_penalty           that reward, the other fields
                                                                                        bound as its parameters

Every result is a reward function with TRL's signature that returns `Scores` (rewards and reasons),
so a spec can be named in a training config's rewards, run over a file by `rlvr grade`, or be a
sub-grader of `multi`. Each type's fields are checked when the spec is loaded, before any row is graded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from rlvr.config.choices import MODES
from rlvr.errors import UserError
from rlvr.rewards.code import TEST_MODES
from rlvr.rewards.format import FORMATS
from rlvr.rewards.graders.formula import Formula
from rlvr.rewards.graders.judge import LabelModelGrader, ScoreModelGrader
from rlvr.rewards.graders.multi import MultiGrader, named_specs
from rlvr.rewards.graders.python import PythonGrader
from rlvr.rewards.graders.rows import RowGrader
from rlvr.rewards.graders.spec import check_fields, did_you_mean, get_choice, get_str, load_grader_spec
from rlvr.rewards.graders.text import StringCheckGrader, TextSimilarityGrader
from rlvr.rewards.registry import BUILTIN_REWARDS, bind, require_sandbox
from rlvr.rewards.scores import Scores

RewardFn = Callable[..., Any]

class _SpecType(Protocol):
    """A grader class built from its spec: the fields it requires and allows, and `from_spec`."""

    @property
    def REQUIRED(self) -> tuple[str, ...]: ...

    @property
    def OPTIONAL(self) -> tuple[str, ...]: ...

    def from_spec(self, spec: Mapping[str, Any], name: str) -> RowGrader: ...


# Types built from their spec: the class declares REQUIRED and OPTIONAL fields and from_spec checks their values.
SPEC_TYPES: dict[str, _SpecType] = {
    "string_check": StringCheckGrader,
    "text_similarity": TextSimilarityGrader,
    "python": PythonGrader,
    "score_model": ScoreModelGrader,
    "label_model": LabelModelGrader,
}


def _verifier(reward: str, name: str, *, required: tuple[str, ...] = (), optional: tuple[str, ...] = (),
              **params: Any) -> RewardFn:
    """The built-in `reward` with `params` bound, labelled `name`, grading rows as a grader does: a row
    without a `required` column is scored None ("the row has no 'answer'"), an `optional` column no row
    has arrives as None, and a malformed row (a UserError) is scored None with the problem as its
    reason while the other rows are scored. (In training the reward itself stops at a malformed row.)"""
    fn = functools.partial(BUILTIN_REWARDS[reward], **params)
    require_sandbox(fn)

    def verifier(completions: list[Any], **kwargs: Any) -> Scores:
        n = len(completions)
        given = {**{c: [None] * n for c in (*required, *optional)}, **kwargs}
        missing = [next((c for c in required if given[c][i] is None), None) for i in range(n)]
        rows = [i for i in range(n) if missing[i] is None]
        columns = {k: _take(v, rows, n) for k, v in given.items()}
        graded = dict(zip(rows, _grade(fn, [completions[i] for i in rows], columns)))
        results = [graded[i] if missing[i] is None else (None, f"the row has no '{missing[i]}'") for i in range(n)]
        return Scores([reward for reward, _ in results], [reason for _, reason in results])

    verifier.__name__ = verifier.__qualname__ = name
    return verifier


def _take(value: Any, rows: list[int], n: int) -> Any:
    """The given rows of a column (a keyword that is not a column of n values passes as it is)."""
    return [value[i] for i in rows] if isinstance(value, list) and len(value) == n else value


def _grade(fn: RewardFn, completions: list[Any], kwargs: dict[str, Any]) -> list[tuple[float | None, str]]:
    """(reward, reason) of each row: all rows in one call, or row by row when that call meets a malformed row."""
    if not completions:
        return []
    try:
        scores = _as_scores(fn(completions=completions, **kwargs))
        return list(zip(scores, scores.reasons or [""] * len(scores)))
    except UserError as e:
        if len(completions) == 1:
            return [(None, str(e))]
    n = len(completions)
    one_row: Callable[[int], dict[str, Any]] = lambda i: {k: _take(v, [i], n) for k, v in kwargs.items()}  # noqa: E731
    return [result for i in range(n) for result in _grade(fn, [completions[i]], one_row(i))]


def _as_scores(values: Any) -> Scores:
    return values if isinstance(values, Scores) else Scores(values)


# OpenAI-style names for rlvr's verifiers: (builder from the spec, the optional fields it reads).
VERIFIER_TYPES: dict[str, tuple[Callable[[Mapping[str, Any], str], RewardFn], tuple[str, ...]]] = {
    "math": (lambda spec, name: _verifier("math_accuracy", name, required=("answer",),
                                          mode=get_choice(spec, "mode", MODES, f"grader '{name}'", "strict")),
             ("mode",)),
    "code": (lambda spec, name: _verifier("code_tests", name, optional=("tests", "test"),
                                          mode=get_choice(spec, "mode", TEST_MODES, f"grader '{name}'", "fraction")),
             ("mode",)),
    "countdown": (lambda spec, name: _verifier("countdown", name, required=("numbers", "target")), ()),
    "format": (lambda spec, name: _verifier(FORMATS[get_choice(spec, "format", list(FORMATS), f"grader '{name}'",
                                                               "boxed")].__name__, name),
               ("format",)),
}


def grader_types() -> list[str]:
    """Every `type` a spec may have."""
    return [*SPEC_TYPES, "multi", *VERIFIER_TYPES, *BUILTIN_REWARDS]


def build_grader(spec: Mapping[str, Any], name: str | None = None) -> RewardFn:
    """The reward a checked spec describes; `name` is used when the spec has none (else its type).

    >>> build_grader({"type": "string_check", "reference": "4", "operation": "eq"}).__name__
    'string_check'
    >>> build_grader({"type": "string_chek"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: grader type 'string_chek' is unknown; did you mean 'string_check'? ...
    """
    kind = spec.get("type")
    types = grader_types()
    if kind not in types:
        raise UserError(f"grader type {str(kind)!r} is unknown{did_you_mean(str(kind), types)} "
                        f"(types: {', '.join(types)})")
    grader_name = spec.get("name", name or kind)
    if not isinstance(grader_name, str) or not grader_name:
        raise UserError(f"a {kind} grader's 'name' must be a non-empty string, got {grader_name!r}")
    where = f"grader '{grader_name}' ({kind})"
    if kind == "multi":
        check_fields(spec, MultiGrader.REQUIRED, MultiGrader.OPTIONAL, where)
        sub_specs = named_specs(spec.get("graders"), where)
        graders = {sub: build_grader(sub_spec, sub) for sub, sub_spec in sub_specs.items()}
        formula = Formula.parse(get_str(spec, "calculate_output", where), list(graders), where)
        return MultiGrader(grader_name, graders, formula)
    if kind in SPEC_TYPES:
        check_fields(spec, SPEC_TYPES[kind].REQUIRED, SPEC_TYPES[kind].OPTIONAL, where)
        return SPEC_TYPES[kind].from_spec(spec, grader_name)
    if kind in VERIFIER_TYPES:
        builder, optional = VERIFIER_TYPES[kind]
        check_fields(spec, (), optional, where)
        return builder(spec, grader_name)
    params = {k: v for k, v in spec.items() if k not in ("type", "name")}
    fn = bind(BUILTIN_REWARDS[kind], params, kind) if params else BUILTIN_REWARDS[kind]
    require_sandbox(fn)
    return fn if grader_name == kind else _renamed(fn, grader_name)


def load_grader(source: str | Path | Mapping[str, Any]) -> RewardFn:
    """The reward from a spec mapping, a YAML/JSON file, inline JSON or a type's name.

    >>> load_grader("countdown")(completions=["<answer>2*3</answer>"], numbers=[[2, 3]], target=[6])
    [1.0]
    """
    return build_grader(load_grader_spec(source, grader_types()))


def _renamed(fn: RewardFn, name: str) -> RewardFn:
    def renamed(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    renamed.__name__ = renamed.__qualname__ = name
    return renamed
