"""Which tests a mutant needs: only those that run the function it changes (the test command of `make mutate`).

A mutant changes one expression; it can change what a test sees only if the test runs that code. Before the mutants
run, the module's tests run once under coverage, each test recorded as its own context (pytest-cov's
`--cov-context=test`), and the map says, for every function of the module, which tests execute a line of its body.
Then, for each mutant, `python scripts/mutant_tests.py MAP` compares the module on disk (the mutant) with the
original, finds the innermost function whose body holds every changed line, and runs only that function's tests,
quickest first (each test's time in the traced run), stopping at the first failure. A change outside every function
body (module-level code, a class body, a default value or decorator of a top-level function: what runs at import)
runs all the tests; a function no test runs has no test to run, and its mutant survives, as it would under all of
them.

    .venv/bin/python scripts/mutant_tests.py MAP    # exit status of the selected tests; 0 when none run the code
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import subprocess
import sys
import time
from pathlib import Path


def function_bodies(source: str) -> list[tuple[int, int]]:
    """(first line, last line) of the body of every function in `source`, nested ones included."""
    return [(node.body[0].lineno, node.end_lineno or node.body[0].lineno) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def changed_lines(before: str, after: str) -> list[int]:
    """The lines of `before` (1-based) that `after` replaces or deletes; for an insertion, the line it follows."""
    lines: list[int] = []
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag != "equal":
            lines += range(i1 + 1, i2 + 1) if i2 > i1 else [max(i1, 1)]
    return lines


def selected(functions: list[dict], changed: list[int], seconds: dict[str, float] | None = None) -> list[str] | None:
    """The tests that run the innermost function body holding every changed line, quickest first (`seconds`: each
    test's time; the likeliest to fail first among those equally quick is not known, so the name breaks ties); None:
    all of them (a change outside every body, or none found)."""
    if not changed:
        return None
    holding = [f for f in functions if all(f["start"] <= line <= f["end"] for line in changed)]
    if not holding:
        return None
    times = seconds or {}
    return sorted(min(holding, key=lambda f: f["end"] - f["start"])["tests"], key=lambda t: (times.get(t, 0.0), t))


_DURATION = re.compile(r"^\s*([0-9.]+)s (?:setup|call|teardown)\s+(\S.*?)\s*$")


def test_seconds(output: str) -> dict[str, float]:
    """Each test's seconds (setup, call and teardown together) from pytest's `--durations=0` lines."""
    seconds: dict[str, float] = {}
    for line in output.splitlines():
        if match := _DURATION.match(line):
            seconds[match[2]] = seconds.get(match[2], 0.0) + float(match[1])
    return seconds


def build_map(pytest: list[str], targets: list[str], source: Path, tree: Path, out: Path, env: dict[str, str]) -> float:
    """Run `pytest targets` once under coverage in `tree`, one context per test, and write the map to `out`: the
    command, the original source, each function body of `source` with the tests that execute it, and each test's
    seconds; the seconds that run took (all the tests, traced: more than a mutant's run of all of them takes). No
    bytecode is written (as cosmic-ray runs its mutants): a mutant of the same size written within the same second as
    a cached original would otherwise run as the original."""
    data_file, began = out.with_suffix(".coverage"), time.monotonic()
    run = subprocess.run([*pytest, f"--cov={source.parent}", "--cov-context=test", "--cov-report=", "--durations=0",
                          "--durations-min=0", *targets], cwd=tree, capture_output=True, text=True,
                         env={**env, "COVERAGE_FILE": str(data_file), "PYTHONDONTWRITEBYTECODE": "1"})
    print(run.stdout[-2000:], run.stderr[-2000:], sep="\n")
    run.check_returncode()
    seconds = time.monotonic() - began
    import coverage

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    by_line = data.contexts_by_lineno(str(source))
    text = source.read_text()
    functions = []
    for start, end in function_bodies(text):
        tests = {c.rsplit("|", 1)[0] for line in range(start, end + 1) for c in by_line.get(line, []) if c}
        functions.append({"start": start, "end": end, "tests": sorted(tests)})
    out.write_text(json.dumps({"pytest": pytest, "targets": targets, "tree": str(tree), "path": str(source),
                               "source": text, "functions": functions, "seconds": test_seconds(run.stdout)}))
    return seconds


def main(map_path: str) -> int:
    m = json.loads(Path(map_path).read_text())
    tests = selected(m["functions"], changed_lines(m["source"], Path(m["path"]).read_text()), m.get("seconds"))
    if tests == []:
        print("no test runs the changed code")
        return 0
    return subprocess.run([*m["pytest"], *(m["targets"] if tests is None else tests)], cwd=m["tree"]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
