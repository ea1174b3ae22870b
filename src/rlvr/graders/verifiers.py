r"""rlvr's built-in verifiers as grader types: ``math``, ``countdown``, ``format``, ``code``, ``python``.

The reward itself always comes from the reward function in `rlvr.rewards` (one implementation,
so grading and training never disagree); these classes only pick the row's columns and add a
short reason. A row lacking a needed column, or holding a value the verifier refuses, is None
with a reason instead of stopping the whole batch.

- math: the ``answer`` column; ``mode: strict`` (``\boxed{}`` / ``<answer>``) or ``lenient``.
- countdown: the ``numbers`` and ``target`` columns.
- format: ``format: boxed`` (default), ``think_answer`` or ``soft_think_answer``.
- code: ``tests`` (a list of ``{"input", "output"}``) or ``test`` + ``entry_point``; ``mode``.
- python: ``source`` defining ``grade(sample, item)``, run in rlvr's sandbox.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

from rlvr.errors import UserError
from rlvr.graders.result import GradeResult
from rlvr.graders.spec import get_choice, get_str
from rlvr.graders.text_graders import short
from rlvr.rewards.countdown import countdown, countdown_expression, evaluate_expression
from rlvr.rewards.format import FORMATS
from rlvr.rewards.extraction import MODES
from rlvr.rewards.math import extract_answer, gold_answer, is_hedged, math_accuracy

def _missing(item: Mapping[str, Any], columns: tuple[str, ...]) -> GradeResult | None:
    """None-reward result naming the first absent (or null) column, or None when all are there."""
    for column in columns:
        if item.get(column) is None:
            return GradeResult(None, f"the row has no '{column}'")
    return None


@dataclass(frozen=True)
class MathGrader:
    r"""`rlvr.rewards.math.math_accuracy` against ``item["answer"]``.

    >>> grader = MathGrader("math", "strict")
    >>> grader.grade([r"\boxed{71}", "72"], [{"answer": "72"}] * 2)  # doctest: +NORMALIZE_WHITESPACE
    [GradeResult(reward=0.0, reason="answer '71' != expected '72'"),
     GradeResult(reward=0.0, reason='no final answer (strict mode reads \\boxed{} or <answer>)')]
    """

    REQUIRED: ClassVar[tuple[str, ...]] = ()
    OPTIONAL: ClassVar[tuple[str, ...]] = ("mode",)

    name: str
    mode: str = "strict"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str) -> MathGrader:
        return cls(name, get_choice(spec, "mode", MODES, f"grader '{name}'", "strict"))

    def grade(self, completions: list[str], items: list[Mapping[str, Any]]) -> list[GradeResult]:
        return [self._grade_one(c, item) for c, item in zip(completions, items, strict=True)]

    def _grade_one(self, completion: str, item: Mapping[str, Any]) -> GradeResult:
        missing = _missing(item, ("answer",))
        if missing is not None:
            return missing
        reward = math_accuracy([completion], [item["answer"]], mode=self.mode)[0]
        gold = gold_answer(item["answer"])
        if reward is None or gold is None:
            return GradeResult(None, "the row's 'answer' is empty")
        predicted = extract_answer(completion, self.mode)
        if reward == 1.0:
            return GradeResult(reward, f"answer {short(predicted or '')} matches")
        if is_hedged(completion):
            return GradeResult(reward, "boxes several different answers")
        if predicted is None:
            wanted = r"\boxed{} or <answer>" if self.mode == "strict" else "any answer"
            return GradeResult(reward, f"no final answer ({self.mode} mode reads {wanted})")
        return GradeResult(reward, f"answer {short(predicted)} != expected {short(gold)}")


@dataclass(frozen=True)
class CountdownGrader:
    """`rlvr.rewards.countdown.countdown` against ``item["numbers"]`` and ``item["target"]``.

    >>> CountdownGrader("countdown").grade(["<answer>8*3</answer>"], [{"numbers": [3, 8], "target": 24}])
    [GradeResult(reward=1.0, reason="'8*3' = 24")]
    """

    REQUIRED: ClassVar[tuple[str, ...]] = ()
    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    name: str

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str) -> CountdownGrader:
        return cls(name)

    def grade(self, completions: list[str], items: list[Mapping[str, Any]]) -> list[GradeResult]:
        return [self._grade_one(c, item) for c, item in zip(completions, items, strict=True)]

    def _grade_one(self, completion: str, item: Mapping[str, Any]) -> GradeResult:
        missing = _missing(item, ("numbers", "target"))
        if missing is not None:
            return missing
        try:
            reward = countdown([completion], [item["numbers"]], [item["target"]])[0]
        except UserError as e:  # a malformed row: this row is not scored, the others still are
            return GradeResult(None, str(e))
        expression = countdown_expression(completion)
        evaluated = None if expression is None else evaluate_expression(expression)
        if expression is None:
            return GradeResult(reward, "no <answer> expression")
        if evaluated is None:
            return GradeResult(reward, f"{short(expression)} is not arithmetic on integers")
        value, used = evaluated
        if reward == 1.0:
            return GradeResult(reward, f"{short(expression)} = {item['target']}")
        if sorted(used) != sorted(int(n) for n in item["numbers"]):
            return GradeResult(reward, f"uses {sorted(used)}, not each of {sorted(item['numbers'])} once")
        return GradeResult(reward, f"{short(expression)} = {value}, not {item['target']}")


@dataclass(frozen=True)
class FormatGrader:
    """One of the format rewards of `rlvr.rewards.format`, chosen by ``format``.

    >>> FormatGrader("format", "think_answer").grade(["<think>a</think><answer>4</answer>", "4"], [{}, {}])
    ... # doctest: +NORMALIZE_WHITESPACE
    [GradeResult(reward=1.0, reason='think_answer format: 1'),
     GradeResult(reward=0.0, reason='think_answer format: 0')]
    """

    REQUIRED: ClassVar[tuple[str, ...]] = ()
    OPTIONAL: ClassVar[tuple[str, ...]] = ("format",)

    name: str
    format: str = "boxed"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str) -> FormatGrader:
        return cls(name, get_choice(spec, "format", list(FORMATS), f"grader '{name}'", "boxed"))

    def grade(self, completions: list[str], items: list[Mapping[str, Any]]) -> list[GradeResult]:
        rewards = FORMATS[self.format](completions)
        return [GradeResult(r, f"{self.format} format: {r:g}") for r in rewards]


@dataclass(frozen=True)
class CodeGrader:
    """`rlvr.rewards.code.code_tests` on the ``tests`` column, or ``test`` + ``entry_point``."""

    REQUIRED: ClassVar[tuple[str, ...]] = ()
    OPTIONAL: ClassVar[tuple[str, ...]] = ("mode",)
    COLUMNS: ClassVar[tuple[str, ...]] = ("tests", "test", "entry_point")

    name: str
    mode: str = "fraction"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str) -> CodeGrader:
        code = _code_module(name)  # fails at load time, before any row is read
        return cls(name, get_choice(spec, "mode", code.MODES, f"grader '{name}'", "fraction"))

    def grade(self, completions: list[str], items: list[Mapping[str, Any]]) -> list[GradeResult]:
        results = [GradeResult(None, "the row has no 'tests' (or 'test' + 'entry_point')")] * len(completions)
        rows = [i for i, item in enumerate(items) if item.get("tests") is not None or item.get("test") is not None]
        try:
            scored = list(zip(rows, self._run(completions, items, rows), strict=True))
        except UserError:
            # One malformed row fails the whole call: go row by row, so only that row is lost.
            scored = []
            for i in rows:
                try:
                    scored.append((i, self._run(completions, items, [i])[0]))
                except UserError as e:
                    results[i] = GradeResult(None, str(e))
        for i, reward in scored:
            if reward is None:
                results[i] = GradeResult(None, "code_tests could not run it (sandbox failure)")
            else:
                results[i] = GradeResult(float(reward), f"tests ({self.mode}): {float(reward):g}")
        return results

    def _run(self, completions: list[str], items: list[Mapping[str, Any]], rows: list[int]) -> list[float | None]:
        """code_tests on the given rows, passing only the test columns some of them have."""
        if not rows:
            return []
        columns = {key: [items[i].get(key) for i in rows] for key in self.COLUMNS}
        present = {key: values for key, values in columns.items() if any(v is not None for v in values)}
        code_tests = _code_module(self.name).code_tests
        return code_tests([completions[i] for i in rows], mode=self.mode, **present)


def _code_module(name: str) -> ModuleType:
    try:
        from rlvr.rewards import code
    except ImportError as e:
        raise UserError(f"grader '{name}': type 'code' needs rlvr.rewards.code, which this install lacks ({e})") from e
    return code


@dataclass(frozen=True)
class PythonGrader:
    """A user's ``grade(sample, item)`` from ``source``, run by `rlvr.graders.python_grader` in its
    sandbox, one fresh process per row (a few rows at a time); the reason says what went wrong."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("source",)
    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    name: str
    source: str

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str) -> PythonGrader:
        source = get_str(spec, "source", f"grader '{name}'")
        try:
            from rlvr.graders import python_grader  # noqa: F401
        except ImportError as e:
            raise UserError(
                f"grader '{name}': type 'python' needs rlvr.graders.python_grader, which this install lacks ({e})"
            ) from e
        return cls(name, source)

    def grade(self, completions: list[str], items: list[Mapping[str, Any]]) -> list[GradeResult]:
        from rlvr.graders.python_grader import grade_in_sandbox

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="python-grader") as pool:
            outcomes = list(pool.map(lambda pair: grade_in_sandbox(self.source, pair[0], dict(pair[1])), zip(completions, items)))
        return [GradeResult(score, reason) for score, reason in outcomes]