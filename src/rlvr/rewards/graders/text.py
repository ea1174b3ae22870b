"""Rewards that compare two rendered templates: ``string_check`` and ``text_similarity``.

Both render ``input`` (by default the completion, ``{{ sample.output_text }}``) and
``reference`` (usually ``{{ item.<column> }}``) for each row, then compare the two strings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rlvr.errors import UserError
from rlvr.rewards.graders.rows import RowGrader
from rlvr.rewards.graders.similarity import METRICS, UNSUPPORTED_METRICS
from rlvr.rewards.graders.spec import get_choice, get_number, get_str
from rlvr.rewards.graders.template import MissingField, render, template_fields
from rlvr.rewards.scores import GradeResult, short

DEFAULT_INPUT = "{{ sample.output_text }}"

# operation -> (does it pass?, the reason's verb when it does, when it does not)
STRING_OPERATIONS: dict[str, tuple[Callable[[str, str], bool], str, str]] = {
    "eq": (lambda text, ref: text == ref, "equals", "does not equal"),
    "ne": (lambda text, ref: text != ref, "differs from", "equals"),
    "like": (lambda text, ref: ref in text, "contains", "does not contain"),
    "ilike": (lambda text, ref: ref.lower() in text.lower(), "contains (any case)", "does not contain (any case)"),
}


@dataclass(frozen=True)
class _Pair:
    """The two templates both graders render: what is graded, and what it is compared with."""

    input: str
    reference: str

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], where: str) -> _Pair:
        pair = cls(get_str(spec, "input", where, DEFAULT_INPUT), get_str(spec, "reference", where))
        template_fields(pair.input, f"{where}, field 'input'")
        template_fields(pair.reference, f"{where}, field 'reference'")
        return pair

    def render(self, completion: str, item: Mapping[str, Any]) -> tuple[str, str]:
        return render(self.input, completion, item), render(self.reference, completion, item)


@dataclass(frozen=True)
class StringCheckGrader(RowGrader):
    """1.0 when ``input`` and ``reference`` pass `operation`, else 0.0.

    eq / ne: exact (in)equality; like: ``reference`` is a substring of ``input``; ilike: the same
    ignoring case.

    >>> grader = StringCheckGrader.from_spec({"reference": "{{ item.city }}", "operation": "ilike"}, "g")
    >>> [r.reward for r in grader.grade(["It is PARIS.", "Lyon"], [{"city": "Paris"}] * 2)]
    [1.0, 0.0]
    """

    REQUIRED: ClassVar[tuple[str, ...]] = ("reference", "operation")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("input",)

    name: str
    pair: _Pair
    operation: str

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str) -> StringCheckGrader:
        where = f"grader '{name}'"
        operation = get_choice(spec, "operation", list(STRING_OPERATIONS), where, "eq")
        return cls(name, _Pair.from_spec(spec, where), operation)

    def grade(self, completions: list[str], items: Sequence[Mapping[str, Any]]) -> list[GradeResult]:
        check, yes, no = STRING_OPERATIONS[self.operation]

        def score(text: str, reference: str) -> GradeResult:
            passed = check(text, reference)
            return GradeResult(float(passed), f"input {yes if passed else no} {short(reference)}")

        return _grade_pairs(self.pair, completions, items, score)


@dataclass(frozen=True)
class TextSimilarityGrader(RowGrader):
    """The similarity of ``input`` to ``reference`` under `metric`, in [0, 1].

    With `pass_threshold`, 1.0 when the similarity reaches it and 0.0 below.

    >>> grader = TextSimilarityGrader.from_spec(
    ...     {"reference": "{{ item.answer }}", "evaluation_metric": "fuzzy_match"}, "g")
    >>> grader.grade(["kitten"], [{"answer": "sitting"}])[0].reward  # see similarity.fuzzy_match
    0.6153846153846154
    """

    REQUIRED: ClassVar[tuple[str, ...]] = ("reference", "evaluation_metric")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("input", "pass_threshold")

    name: str
    pair: _Pair
    metric: str
    pass_threshold: float | None = None

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str) -> TextSimilarityGrader:
        where = f"grader '{name}'"
        if spec.get("evaluation_metric") in UNSUPPORTED_METRICS:
            raise UserError(
                f"{where}: evaluation_metric '{spec['evaluation_metric']}' needs a model or word tables "
                f"rlvr does not ship (use one of: {', '.join(METRICS)}; or a score_model judge)"
            )
        metric = get_choice(spec, "evaluation_metric", list(METRICS), where, "fuzzy_match")
        threshold = None
        if "pass_threshold" in spec:
            threshold = get_number(spec, "pass_threshold", where)
            if not 0.0 <= threshold <= 1.0:
                raise UserError(f"{where}: field 'pass_threshold' must be in [0, 1], got {threshold}")
        return cls(name, _Pair.from_spec(spec, where), metric, threshold)

    def grade(self, completions: list[str], items: Sequence[Mapping[str, Any]]) -> list[GradeResult]:
        metric = METRICS[self.metric]

        def score(text: str, reference: str) -> GradeResult:
            value = metric(text, reference)
            reason = f"{self.metric} {value:.3f}"
            if self.pass_threshold is None:
                return GradeResult(value, reason)
            passed = value >= self.pass_threshold
            verb = ">=" if passed else "<"
            return GradeResult(float(passed), f"{reason} {verb} pass_threshold {self.pass_threshold:g}")

        return _grade_pairs(self.pair, completions, items, score)


def _grade_pairs(
    pair: _Pair, completions: list[str], items: Sequence[Mapping[str, Any]], score: Callable[[str, str], GradeResult]
) -> list[GradeResult]:
    """Render (input, reference) for each row and score it; a row missing a field gets None."""
    results = []
    for completion, item in zip(completions, items, strict=True):
        try:
            text, reference = pair.render(completion, item)
        except MissingField as e:
            results.append(GradeResult(None, str(e)))
            continue
        results.append(score(text, reference))
    return results
