"""The ``multi`` grader: run named sub-graders and combine their rewards with a formula.

::

    type: multi
    graders:
      accuracy: {type: math}
      format: {type: format, format: think_answer}
    calculate_output: 0.9 * accuracy + 0.1 * format

``graders`` is a mapping from name to spec (OpenAI's shape) or a list of specs that each carry a
``name``. Only the sub-graders the formula uses are run. A row is None when any of them is None
for it, or when the formula divides by zero there.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rlvr.errors import UserError, a_kind
from rlvr.rewards.combine import grade_rows
from rlvr.rewards.graders.formula import Formula
from rlvr.rewards.graders.rows import RowGrader
from rlvr.rewards.scores import GradeResult


@dataclass(frozen=True)
class MultiGrader(RowGrader):
    """Sub-rewards by name (already built, rlvr.rewards.graders.build), combined per row by `formula`."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("graders", "calculate_output")
    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    name: str
    graders: dict[str, Callable[..., Any]]
    formula: Formula

    def grade(self, completions: list[str], items: Sequence[Mapping[str, Any]]) -> list[GradeResult]:
        rows = [dict(item) for item in items]
        graded = {name: grade_rows(name, self.graders[name], completions, rows) for name in self.formula.names}
        return [self._combine({name: results[i] for name, results in graded.items()}) for i in range(len(completions))]

    def _combine(self, parts: dict[str, GradeResult]) -> GradeResult:
        """One row's reward from its sub-graders' results."""
        for name, part in parts.items():
            if part.reward is None:
                return GradeResult(None, f"{name} not scored: {part.reason}")
        values = {name: float(part.reward) for name, part in parts.items() if part.reward is not None}
        breakdown = ", ".join(f"{name}={value:g}" for name, value in values.items())
        try:
            total = self.formula.evaluate(values)
        except ZeroDivisionError:
            return GradeResult(None, f"calculate_output divides by zero ({breakdown})")
        if not math.isfinite(total):  # inf or NaN would poison the group's mean and std
            return GradeResult(None, f"calculate_output gave {total} ({breakdown})")
        return GradeResult(total, breakdown)


def named_specs(graders: Any, where: str) -> dict[str, dict[str, Any]]:
    """The sub-grader specs by name, from a mapping or from a list of specs with names."""
    if isinstance(graders, list):
        if not all(isinstance(g, dict) and isinstance(g.get("name"), str) for g in graders):
            raise UserError(f"{where}: each entry of the 'graders' list needs a 'name' (or write graders as a mapping)")
        named = {g["name"]: g for g in graders}
        if len(named) != len(graders):
            raise UserError(f"{where}: two sub-graders share a name (give each its own)")
    elif isinstance(graders, dict) and graders:
        named = graders
    else:
        raise UserError(f"{where}: field 'graders' must map names to grader specs, got {graders!r}")
    for sub_name, sub_spec in named.items():
        if not isinstance(sub_name, str) or not sub_name.isidentifier() or keyword.iskeyword(sub_name):
            raise UserError(
                f"{where}: sub-grader name {sub_name!r} cannot be used in calculate_output "
                "(use letters, digits and _, not starting with a digit)"
            )
        if not isinstance(sub_spec, dict):
            raise UserError(f"{where}: sub-grader '{sub_name}' is {a_kind(sub_spec)}, not a grader spec")
    # A sub-spec's own `name` is dropped so the name used in the formula is the one reported.
    return {sub_name: {k: v for k, v in sub_spec.items() if k != "name"} for sub_name, sub_spec in named.items()}
