"""OpenAI-RFT-style python graders: the user's ``grade(sample, item) -> float``, run in the sandbox.

``source`` defines ``grade(sample: dict, item: dict) -> float``. For each completion it runs in a
fresh `rlvr.sandbox` process, never in the trainer's: ``sample = {"output_text": completion}``
and ``item`` (the dataset row) arrive as JSON on stdin, and the score goes back as JSON. The
trainer's process only parses that JSON: an int or float (not a bool, not NaN) is the reward.
A grader that does not compile or defines no ``grade`` is refused when it is built (its source is
parsed here, never run here). At run time a grader that raises, times out, prints no score or
returns a non-number scores 0.0 with a reason starting "grader failed" (logged once per distinct
reason; `rlvr grade` counts them, and stops when every row failed); a sandbox that cannot start
gives None.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlvr.errors import UserError
from rlvr.rewards.graders.rows import RowGrader
from rlvr.rewards.graders.spec import get_str
from rlvr.rewards.scores import GradeResult
from rlvr.sandbox import Limits, isolation, run_python

# Runs in the sandbox. The grader's own prints go to stderr; only the score uses stdout.
_HARNESS = """
import json, os, sys
channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
payload = json.loads(sys.stdin.read())
namespace = {"__name__": "grader"}
with open("grader.py", encoding="utf-8") as f:
    exec(compile(f.read(), "grader.py", "exec"), namespace)
score = namespace["grade"](payload["sample"], payload["item"])
if type(score) in (int, float):
    channel.write(json.dumps({"score": score}))
else:
    channel.write(json.dumps({"invalid": repr(score)[:200]}))
"""
_logger = logging.getLogger(__name__)
FAILED = "grader failed"
"""How the reason of a row the grader failed on begins."""


def grade_in_sandbox(source: str, completion: str, item: dict[str, Any],
                     limits: Limits = Limits()) -> tuple[float | None, str]:
    """(score, reason) for one completion: 0.0 when the grader fails, None when the sandbox does."""
    payload = json.dumps({"sample": {"output_text": completion}, "item": item}, default=str)
    result = run_python(_HARNESS, stdin=payload, limits=limits, files={"grader.py": source})
    if result.status == "infra_error":
        return None, f"sandbox failure: {result.stderr.strip()[-300:]}"
    if result.status != "ok":
        last = (result.stderr.strip().splitlines() or [""])[-1]
        return 0.0, f"{FAILED} ({result.status}): {last[:300]}"
    try:
        reply = json.loads(result.stdout)
    except ValueError:
        return 0.0, f"{FAILED}: it printed no score"
    score: Any = reply.get("score") if isinstance(reply, dict) else None  # any JSON value: checked below
    if type(score) not in (int, float) or not math.isfinite(score):
        invalid = reply.get("invalid", score) if isinstance(reply, dict) else reply
        return 0.0, f"{FAILED}: not a finite number: grade() returned {invalid}"
    return float(score), f"grade() returned {score:g}"


@dataclass(frozen=True)
class PythonGrader(RowGrader):
    """The user's ``grade(sample, item)`` from `source`, one fresh sandboxed process per row (a few rows
    at a time); the reason says what went wrong, and each distinct failure is logged once."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("source",)
    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    name: str
    source: str
    limits: Limits = Limits()
    logged: set[str] = field(default_factory=set, compare=False)

    def __post_init__(self) -> None:
        check_source(self.source, self.name)
        isolation()  # fail closed: no sandbox (and no opt-in), no grader

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str) -> PythonGrader:
        return cls(name, get_str(spec, "source", f"grader '{name}'"))

    def grade(self, completions: list[str], items: Sequence[Mapping[str, Any]]) -> list[GradeResult]:
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            graded = list(pool.map(lambda pair: grade_in_sandbox(self.source, pair[0], dict(pair[1]), self.limits),
                                   zip(completions, items)))
        for score, reason in graded:
            if (score is None or reason.startswith(FAILED)) and reason not in self.logged:
                self.logged.add(reason)
                _logger.warning("python grader: %s", reason)
        return [GradeResult(score, reason) for score, reason in graded]


def check_source(source: str, name: str) -> None:
    r"""A UserError when `source` does not compile or defines no top-level ``grade`` (parsed, not run).

    >>> check_source("def grade(sample, item):\n    return 1.0\n", "g")
    >>> check_source("def grade(sample, item)\n    return 1.0\n", "g")
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: python grader 'g': its source does not compile: expected ':' (line 1)
    """
    try:
        tree = ast.parse(source, filename="grader.py")
    except SyntaxError as e:
        raise UserError(f"python grader '{name}': its source does not compile: {e.msg} (line {e.lineno})") from None
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    defined |= {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                if isinstance(t, ast.Name)}
    defined |= {alias.asname or alias.name for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names}
    if "grade" not in defined:
        raise UserError(f"python grader '{name}' defines no grade(sample, item) function "
                        "(its source must define one at the top level)")


def python_grader(source: str, *, limits: Limits = Limits()) -> PythonGrader:
    """A TRL-style reward function that scores each completion with `source`'s ``grade``.

    ``fn(prompts=..., completions=..., completion_ids=..., **columns) -> Scores``; each row's
    ``item`` is built from the dataset columns. Completions run in parallel, each in its own
    sandboxed process.
    """
    return PythonGrader("python", source, limits)
