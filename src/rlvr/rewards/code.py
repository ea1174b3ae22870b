r"""Code rewards: run the completion's program against the dataset's tests, in the sandbox.

Two kinds of tests, picked by the dataset's columns:

- stdin/stdout (`tests`: a list of ``{"input": str, "output": str}``): the program runs once per
  case, each in a fresh sandboxed process; its WHOLE stdout, after trailing spaces per line and
  trailing blank lines are stripped, must equal the expected output. It is compared here, in the
  trainer's process, never by the candidate; a crash, timeout or non-zero exit fails the case.
- function tests in HumanEval's format (`test` defining ``check(candidate)``, plus
  `entry_point`): see `rlvr.sandbox.calls`. The candidate's code runs in one sandbox that only
  serves calls; ``check`` runs in another, where ``candidate`` is a proxy and every result
  arrives as plain JSON, so a forged ``__eq__``, an early ``sys.exit(0)`` or printed fake
  results cannot pass. Each assertion is counted.

The reward is the fraction of cases (or assertions) passed, or 1/0 with ``mode="all"``
(`code_tests_all`). An optional `code_prefix` column (HumanEval's prompt: imports, helpers and the
signature) runs before the completion's block; with ``extraction="lenient"``
(`code_continuation_all`) a completion without a block is read as the continuation of that prefix.
A completion without a code block scores 0.0; an infrastructure failure (the sandbox could not
start, the test code itself is broken) gives None, never a silent 0.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from rlvr.config.choices import MODES as EXTRACTION_MODES
from rlvr.errors import UserError
from rlvr.rewards.scores import Scores
from rlvr.rewards.text import completion_text
from rlvr.sandbox import Limits, run_python
from rlvr.sandbox.calls import run_function_tests

TEST_MODES = ("fraction", "all")  # the reward: the share of tests passed, or 1 only when all pass

_FENCE = re.compile(r"[ \t]*```[ \t]*([\w+-]*)")
_PYTHON_TAGS = ("", "python", "python3", "py")
_logger = logging.getLogger(__name__)


def extract_code(text: str) -> str | None:
    """The last fenced code block (```python or a bare ```), else None.

    >>> extract_code("Try:\\n```python\\nprint(1)\\n```\\nthen\\n```\\nprint(2)\\n```")
    'print(2)\\n'
    >>> extract_code("```bash\\nls\\n```") is None, extract_code("```python\\nunclosed") is None
    (True, True)
    """
    last: str | None = None
    block: list[str] | None = None  # lines of the open block, None outside one
    tag = ""
    # Fences are paired line by line, in order, so the closing fence of a ```bash block is
    # never mistaken for the opening of a bare one.
    for line in text.split("\n"):
        fence = _FENCE.match(line)
        if block is None and fence is not None:
            block, tag = [], fence.group(1).lower()
        elif block is not None and fence is not None and not fence.group(1):
            if tag in _PYTHON_TAGS:
                last = "".join(f"{kept}\n" for kept in block)
            block = None
        elif block is not None:
            block.append(line)
    return last


def normalize_output(text: str) -> str:
    """Output with trailing whitespace stripped from each line and trailing blank lines dropped.

    >>> normalize_output("1 2  \\r\\n3\\n\\n\\n")
    '1 2\\n3'
    """
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def stdio_score(code: str, tests: Sequence[dict[str, str]], mode: str = "fraction",
                limits: Limits = Limits()) -> float | None:
    """Fraction of stdin/stdout cases passed (or 1/0 for mode "all"); None on infra failure."""
    passed = 0
    for case in tests:
        result = run_python(code, stdin=case["input"], limits=limits)
        if result.status == "infra_error":
            _logger.warning("code_tests: sandbox failure, reward None: %s", result.stderr[-300:])
            return None
        ok = result.status == "ok" and normalize_output(result.stdout) == normalize_output(case["output"])
        if not ok and mode == "all":
            return 0.0  # the rest cannot change an all-or-nothing score
        passed += ok
    return passed / len(tests) if tests else None


def function_score(code: str, test: str, entry_point: str, mode: str = "fraction",
                   limits: Limits = Limits()) -> float | None:
    """Fraction of HumanEval-style assertions passed (or 1/0 for mode "all"); None on infra."""
    report = run_function_tests(code, test, entry_point, limits)
    fraction = report.fraction()
    if fraction is None:
        _logger.warning("code_tests: %s, reward None", report.detail or "infrastructure failure")
        return None
    return fraction if mode == "fraction" else float(fraction == 1.0)


def code_tests(
    completions: Sequence[Any],
    tests: Sequence[Any] | None = None,
    test: Sequence[str | None] | None = None,
    entry_point: Sequence[str | None] | None = None,
    mode: str = "fraction",
    limits: Limits | None = None,
    code_prefix: Sequence[str | None] | None = None,
    extraction: str = "strict",
    **kwargs: Any,
) -> Scores:
    """Reward each completion's last code block by the dataset's tests, run in the sandbox; a reason for each.

    `tests` (stdin/stdout cases, a list or its JSON string per row) or `test` + `entry_point`
    (HumanEval) are dataset columns, one entry per completion. A row with neither gets None
    (not a code row). Completions run in parallel, each in its own fresh processes. Other
    keyword arguments (TRL's prompts, completion_ids, other columns) are ignored.

    >>> program = "```python\\nprint(int(input()) * 2)\\n```"
    >>> code_tests([program, "no code"], tests=[[{"input": "21", "output": "42"}]] * 2)
    [1.0, 0.0]
    """
    if mode not in TEST_MODES:
        raise UserError(f"code_tests mode {mode!r} is not one of {TEST_MODES}")
    if extraction not in EXTRACTION_MODES:
        raise UserError(f"code_tests extraction {extraction!r} is not one of {EXTRACTION_MODES}")
    if tests is None and test is None:
        raise UserError("code_tests needs a `tests` column (stdin/stdout cases) or `test` + "
                        "`entry_point` columns (HumanEval format) in the dataset")
    rows = [_row(i, tests, test, entry_point) for i in range(len(completions))]
    chosen = limits or Limits()
    prefixes = list(code_prefix) if code_prefix is not None else [None] * len(completions)
    programs = [program(completion_text(c), prefix or "", extraction)
                for c, prefix in zip(completions, prefixes, strict=True)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        rewards = list(pool.map(lambda code, row: _score(code, row, mode, chosen), programs, rows))
    return Scores(rewards, [_reason(reward, row, code, mode) for reward, row, code in zip(rewards, rows, programs)])


def _reason(reward: float | None, row: dict[str, Any], code: str | None, mode: str) -> str:
    if not row:
        return "the row has no 'tests' (or 'test' + 'entry_point')"
    if reward is None:
        return "the sandbox could not run it (infrastructure failure)"
    if code is None:
        return "no code block to run"
    return f"tests ({mode}): {reward:g}"


def code_tests_all(completions: Sequence[Any], **kwargs: Any) -> Scores:
    """`code_tests` with mode "all": 1.0 only when every test passes, else 0.0."""
    return code_tests(completions, **{**kwargs, "mode": "all"})


def code_continuation_all(completions: Sequence[Any], **kwargs: Any) -> Scores:
    """`code_tests_all` that also reads a completion without a code block as the prefix's continuation."""
    return code_tests(completions, **{**kwargs, "mode": "all", "extraction": "lenient"})


def program(text: str, prefix: str, extraction: str = "strict") -> str | None:
    r"""The code a completion stands for: `prefix`, then its last block; None when there is none.

    >>> program("```python\ndef f():\n    return 1\n```", "import os\n")
    'import os\n\ndef f():\n    return 1\n'
    >>> program("    return 1\n", "def f():\n", "lenient"), program("    return 1\n", "def f():\n")
    ('def f():\n    return 1\n', None)
    """
    block = extract_code(text)
    if block is not None:
        return f"{prefix}\n{block}" if prefix else block
    return f"{prefix}{text}" if extraction == "lenient" and prefix else None


def _row(i: int, tests: Sequence[Any] | None, test: Sequence[str | None] | None,
         entry_point: Sequence[str | None] | None) -> dict[str, Any]:
    """Row i's tests, checked: {"cases": [...]} or {"test": str, "entry_point": str} or {}."""
    cases = tests[i] if tests is not None else None
    if cases is not None:
        return {"cases": _cases(cases)}
    check = test[i] if test is not None else None
    if check is None:
        return {}
    name = entry_point[i] if entry_point is not None else None
    if not isinstance(name, str) or not name.isidentifier():
        raise UserError(f"row {i} has a `test` but its `entry_point` is {name!r}; "
                        "give the name of the function the test calls")
    return {"test": check, "entry_point": name}


def _cases(cases: Any) -> list[dict[str, str]]:
    """stdin/stdout cases from a list of dicts or its JSON string."""
    if isinstance(cases, str):
        try:
            cases = json.loads(cases)
        except ValueError:
            cases = None  # reported below
    valid = isinstance(cases, list) and all(
        isinstance(c, dict) and isinstance(c.get("input"), str) and isinstance(c.get("output"), str)
        for c in cases)
    if not valid:
        raise UserError("the `tests` column must hold lists of {'input': str, 'output': str} "
                        "(or their JSON strings)")
    return cast(list[dict[str, str]], cases)


def _score(code: str | None, row: dict[str, Any], mode: str, limits: Limits) -> float | None:
    if not row:
        return None
    if code is None:
        return 0.0
    if "cases" in row:
        return stdio_score(code, row["cases"], mode, limits)
    return function_score(code, row["test"], row["entry_point"], mode, limits)
