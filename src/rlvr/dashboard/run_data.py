"""Reading a run directory tolerantly: a missing, half-written or malformed file is a message, not a crash.

A row that cannot be shown (not a JSON object, a metrics row without a numeric step, a group whose
completions, rewards or advantages are not lists) is skipped and named in `RunData.problems`; what the
pages then read from the rows they keep is checked where it is shown (rlvr.dashboard.report.number).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.errors import UserError

SHOWN_PROBLEMS = 5  # per file: the first rows skipped are named, the others counted


@dataclass
class RunData:
    path: Path
    config: str  # config.yaml as text ("" when absent)
    metrics: list[dict[str, Any]]  # one dict per step, in order; each has a finite number as its "step"
    summary: dict[str, Any] | None
    groups: list[dict[str, Any]]  # samples.jsonl: recorded groups of completions
    problems: list[str] = field(default_factory=list)  # what could not be read, in words


def read_run(path: Path) -> RunData:
    if not path.is_dir():
        raise UserError(f"{path} is not a directory: give a run directory made by `rlvr train`")
    problems: list[str] = []
    metrics = _jsonl(path / "metrics.jsonl", problems, _metrics_problem)
    if not (path / "metrics.jsonl").exists():
        problems.append("no metrics.jsonl yet (has the run taken its first step?)")
    summary = None
    if (path / "summary.json").is_file():
        try:
            summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
        except ValueError:
            problems.append("summary.json is not valid JSON (being written?)")
        if summary is not None and not isinstance(summary, dict):
            problems.append(f"summary.json holds {json_kind(summary)}, not a JSON object (ignored)")
            summary = None
    config_file = path / "config.yaml"
    config = config_file.read_text(encoding="utf-8", errors="replace") if config_file.is_file() else ""
    return RunData(path=path, config=config, metrics=metrics, summary=summary,
                   groups=_jsonl(path / "samples.jsonl", problems, _group_problem), problems=problems)


def _jsonl(path: Path, problems: list[str], problem_of: Callable[[dict[str, Any]], str | None]) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file that `problem_of` finds nothing wrong with; the others, and a torn last
    line (a writer mid-line), are skipped and noted."""
    if not path.is_file():
        return []
    rows, skipped = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        try:
            row = json.loads(line)
        except ValueError:
            skipped.append(f"line {number} is not complete JSON")
            continue
        problem = problem_of(row) if isinstance(row, dict) else f"is {json_kind(row)}, not a JSON object"
        if problem is None:
            rows.append(row)
        else:
            skipped.append(f"line {number} {problem}")
    problems += [f"{path.name} {what} (skipped)" for what in skipped[:SHOWN_PROBLEMS]]
    more = len(skipped) - SHOWN_PROBLEMS
    if more > 0:
        problems.append(f"{path.name}: {more} more line{'s' if more > 1 else ''} skipped")
    return rows


def _metrics_problem(row: dict[str, Any]) -> str | None:
    """Why a metrics row cannot be placed on the charts' step axis, or None.

    >>> _metrics_problem({"step": 3}), _metrics_problem({"step": "x"}), _metrics_problem({"kl": 0.1})
    (None, 'has step "x", not a number', 'has no step')
    """
    if "step" not in row:
        return "has no step"
    step = row["step"]
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step):
        return f"has step {json.dumps(step)[:40]}, not a number"
    return None


def _group_problem(row: dict[str, Any]) -> str | None:
    """Why a recorded group cannot be shown as completions with their rewards and advantages, or None."""
    for name in ("completions", "rewards", "advantages", "transcripts"):
        if name in row and not isinstance(row[name], list):
            return f"has {name} that are not a list"
    return None


def json_kind(value: Any) -> str:
    """What a parsed JSON value is, in JSON's words.

    >>> json_kind([1]), json_kind("x"), json_kind(2.5), json_kind(None)
    ('an array', 'a string', 'a number', 'null')
    """
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    kinds = {str: "a string", list: "an array", dict: "an object", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)
