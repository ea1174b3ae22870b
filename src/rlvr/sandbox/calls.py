"""Function tests (HumanEval's ``check(candidate)``) where the candidate never meets the comparison.

Two sandboxes per completion, started fresh:

- the candidate's: `serve_calls.py` loads the solution and only *serves calls*, one JSON line in,
  one JSON line out, results converted with an exact-type check (`plain`);
- the test's: `check_calls.py` runs the dataset's ``check`` with ``candidate`` bound to a proxy
  that writes each call out and reads the reply back.

This process relays between them: each reply from the candidate is parsed with `json.loads` here
and re-serialised before the test sees it, so whatever the candidate does (an object whose
``__eq__`` always says True, ``sys.exit(0)`` before the tests, forged "all passed" output,
killing its parent) reaches the comparisons only as plain data or as a failed call. The test
process reports each assertion as it runs, so a run cut short by the wall clock still counts
what passed. The reward is computed here, from those reports (`CallReport.fraction`).
"""

from __future__ import annotations

import ast
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rlvr.errors import UserError
from rlvr.sandbox.limits import Limits
from rlvr.sandbox.process import SandboxProcess
from rlvr.sandbox.runner import write_files

_HERE = Path(__file__).parent
_ASSERT_HOOK = "__rlvr_assert"

Outcome = Literal["completed", "aborted", "infra"]


@dataclass(frozen=True)
class CallReport:
    """What one run of a function test found."""

    passed: int
    """Assertions that held."""
    failed: int
    """Assertions that did not hold or raised."""
    asserts_in_source: int
    """Non-constant ``assert`` statements in the test code (a loop's one counts once)."""
    outcome: Outcome
    """completed: ``check`` returned; aborted: it raised or ran out of time (the rest counts as
    failed); infra: the sandbox or the test itself failed, which says nothing about the candidate."""
    detail: str = ""

    def fraction(self) -> float | None:
        """Passed / total; None for infra. Total is the larger of the asserts in the source and
        the asserts that ran (plus one for an abort), so stopping early never raises the score.

        >>> CallReport(3, 0, 3, "completed").fraction(), CallReport(3, 0, 5, "aborted").fraction()
        (1.0, 0.6)
        >>> CallReport(0, 0, 0, "completed").fraction(), CallReport(0, 0, 0, "aborted").fraction()
        (1.0, 0.0)
        """
        if self.outcome == "infra":
            return None
        ran = self.passed + self.failed + (self.outcome == "aborted")
        total = max(self.asserts_in_source, ran)
        if total == 0:  # a test without asserts: passing means returning
            return 1.0 if self.outcome == "completed" else 0.0
        return self.passed / total


class _CountingAsserts(ast.NodeTransformer):
    """Rewrite ``assert test, msg`` into ``__rlvr_assert(lambda: test)``.

    Constant asserts (``assert True, "debugging aid"``, common in HumanEval) are left alone and
    not counted: they pass for every candidate and would only inflate the fraction.
    """

    def __init__(self) -> None:
        self.count = 0

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        if isinstance(node.test, ast.Constant):
            return node
        self.count += 1
        hook = ast.Call(ast.Name(_ASSERT_HOOK, ast.Load()),
                        [ast.Lambda(_no_arguments(), node.test)], [])
        return ast.copy_location(ast.Expr(hook), node)


def _no_arguments() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                         kwarg=None, defaults=[])


def instrument(test: str) -> tuple[str, int]:
    """(the test code with counted asserts, how many asserts it has); UserError if unusable."""
    try:
        tree = ast.parse(test)
    except SyntaxError as exc:
        raise UserError(f"a `test` column entry is not valid Python ({exc.msg}, line {exc.lineno}); "
                        "fix the dataset's test code") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in tree.body):
        raise UserError("a `test` column entry defines no `check(candidate)` function "
                        "(HumanEval format); fix the dataset or use stdin/stdout `tests`")
    counter = _CountingAsserts()
    tree = ast.fix_missing_locations(counter.visit(tree))
    return ast.unparse(tree), counter.count


def run_function_tests(code: str, test: str, entry_point: str, limits: Limits = Limits()) -> CallReport:
    """Run HumanEval-style `test` (defining ``check(candidate)``) against `code`'s `entry_point`."""
    source, asserts = instrument(test)
    harness = {"plain.py": (_HERE / "plain.py").read_text(encoding="utf-8")}
    with tempfile.TemporaryDirectory(prefix="rlvr-check-") as check_dir, \
            tempfile.TemporaryDirectory(prefix="rlvr-candidate-") as candidate_dir:
        write_files(check_dir, {**harness, "test.py": source,
                                "check_calls.py": (_HERE / "check_calls.py").read_text("utf-8")})
        write_files(candidate_dir, {**harness, "solution.py": code,
                                    "serve_calls.py": (_HERE / "serve_calls.py").read_text("utf-8")})
        checker = SandboxProcess(["check_calls.py", "test.py", entry_point], check_dir, limits)
        server = SandboxProcess(["serve_calls.py", "solution.py", entry_point], candidate_dir, limits)
        try:
            return _relay(checker, server, asserts)
        finally:
            checker.close()
            server.close()


def _relay(checker: SandboxProcess, server: SandboxProcess, asserts: int) -> CallReport:
    """Pass calls from the test to the candidate and replies back, counting assertions."""
    passed = failed = 0
    while True:
        line = checker.read_line()
        if line is None:
            return _checker_stopped(checker, passed, failed, asserts)
        message = _parse(line)
        if message is None:
            return CallReport(passed, failed, asserts, "infra", f"the test process said {line[:200]!r}")
        if "assert" in message:
            passed += message["assert"] is True
            failed += message["assert"] is not True
        elif "call" in message:
            reply = _ask(server, message["call"])
            if reply is None:
                return CallReport(passed, failed, asserts, "infra", "the candidate's sandbox failed to start")
            checker.send((json.dumps(reply) + "\n").encode())
        elif message.get("done") in ("completed", "aborted"):
            return CallReport(passed, failed, asserts, message["done"], str(message.get("detail", "")))
        else:
            return CallReport(passed, failed, asserts, "infra", str(message.get("detail", message)))


def _ask(server: SandboxProcess, call: Any) -> dict[str, Any] | None:
    """The candidate's reply to one call, as plain JSON data; None if its sandbox never started."""
    server.send((json.dumps(call) + "\n").encode())
    line = server.read_line()
    if line is None:
        if server.started is not True:
            return None
        return {"error": f"the candidate process ended ({server.kill_reason or 'exited'})"}
    reply = _parse(line)
    if reply is None or not (set(reply) == {"ok"} or (set(reply) == {"error"}
                                                       and isinstance(reply["error"], str))):
        return {"error": "the candidate's reply was not a result"}
    return reply


def _parse(line: bytes | None) -> dict[str, Any] | None:
    """A JSON object from one line; None for no line or anything else."""
    if line is None:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, nested too deep, an int too long
        return None
    return value if isinstance(value, dict) else None


def _checker_stopped(checker: SandboxProcess, passed: int, failed: int, asserts: int) -> CallReport:
    """The test process stopped without saying done. Out of time, memory or output counts as the
    candidate's failure (it was slow, or its answers sent the test into a long loop); anything
    else (the sandbox never started, the harness crashed) is infrastructure."""
    result = checker.finish()
    if result.status in ("timeout", "memory", "output_limit"):
        return CallReport(passed, failed, asserts, "aborted", f"the test process stopped: {result.status}")
    return CallReport(passed, failed, asserts, "infra",
                      f"the test process failed ({result.status}): {result.stderr[-500:]}")
