"""From a spec to a grader: the one table of grader types.

Each type's class declares its REQUIRED and OPTIONAL fields and a ``from_spec`` that checks
their values, so a spec is fully checked when it is loaded, before any row is graded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rlvr.errors import UserError
from rlvr.graders.judge import LabelModelGrader, ScoreModelGrader
from rlvr.graders.multi import MultiGrader
from rlvr.graders.result import Grader, as_reward_function
from rlvr.graders.spec import check_fields, did_you_mean, load_grader_spec
from rlvr.graders.text_graders import StringCheckGrader, TextSimilarityGrader
from rlvr.graders.verifiers import CodeGrader, CountdownGrader, FormatGrader, MathGrader, PythonGrader

# type name -> the grader class: REQUIRED and OPTIONAL field names, from_spec(spec, name), grade().
GRADER_TYPES: dict[str, Any] = {
    "string_check": StringCheckGrader,
    "text_similarity": TextSimilarityGrader,
    "python": PythonGrader,
    "score_model": ScoreModelGrader,
    "label_model": LabelModelGrader,
    "multi": MultiGrader,
    "math": MathGrader,
    "code": CodeGrader,
    "countdown": CountdownGrader,
    "format": FormatGrader,
}


def build_grader(spec: Mapping[str, Any], name: str | None = None) -> Grader:
    """The grader a checked spec describes; `name` is used when the spec has none (else its type).

    >>> build_grader({"type": "string_check", "reference": "4", "operation": "eq"}).name
    'string_check'
    >>> build_grader({"type": "string_chek"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: grader type 'string_chek' is unknown; did you mean 'string_check'? ...
    """
    kind = spec.get("type")
    if kind not in GRADER_TYPES:
        raise UserError(
            f"grader type {str(kind)!r} is unknown{did_you_mean(str(kind), GRADER_TYPES)} "
            f"(types: {', '.join(GRADER_TYPES)})"
        )
    grader_name = spec.get("name", name or kind)
    if not isinstance(grader_name, str) or not grader_name:
        raise UserError(f"a {kind} grader's 'name' must be a non-empty string, got {grader_name!r}")
    grader_class = GRADER_TYPES[kind]
    check_fields(spec, grader_class.REQUIRED, grader_class.OPTIONAL, f"grader '{grader_name}' ({kind})")
    return grader_class.from_spec(spec, grader_name)


def load_grader(source: str | Path | Mapping[str, Any]) -> Grader:
    """The grader from a spec mapping, a YAML/JSON file, inline JSON or a built-in name.

    >>> load_grader("countdown").grade(["<answer>2*3</answer>"], [{"numbers": [2, 3], "target": 6}])[0].reward
    1.0
    """
    return build_grader(load_grader_spec(source))


def load_grader_reward(source: str | Path | Mapping[str, Any]) -> Callable[..., list[float | None]]:
    """A grader spec as a TRL-style reward function (see `as_reward_function`).

    >>> reward = load_grader_reward({"type": "format", "name": "boxed"})
    >>> reward(prompts=["q"], completions=[r"\\boxed{1}"], completion_ids=[[1]])
    [1.0]
    """
    return as_reward_function(load_grader(source))
