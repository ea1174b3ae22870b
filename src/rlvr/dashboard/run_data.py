"""Reading a run directory tolerantly: a missing or half-written file is a message, not a crash."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.errors import UserError


@dataclass
class RunData:
    path: Path
    config: str  # config.yaml as text ("" when absent)
    metrics: list[dict[str, Any]]  # one dict per step, in order
    summary: dict[str, Any] | None
    groups: list[dict[str, Any]]  # samples.jsonl: recorded groups of completions
    problems: list[str] = field(default_factory=list)  # what could not be read, in words


def read_run(path: Path) -> RunData:
    if not path.is_dir():
        raise UserError(f"{path} is not a directory: give a run directory made by `rlvr train`")
    problems: list[str] = []
    metrics = _jsonl(path / "metrics.jsonl", problems)
    if not (path / "metrics.jsonl").exists():
        problems.append("no metrics.jsonl yet (has the run taken its first step?)")
    summary = None
    if (path / "summary.json").is_file():
        try:
            summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
        except ValueError:
            problems.append("summary.json is not valid JSON (being written?)")
    config = (path / "config.yaml").read_text(encoding="utf-8") if (path / "config.yaml").is_file() else ""
    return RunData(path=path, config=config, metrics=metrics, summary=summary,
                   groups=_jsonl(path / "samples.jsonl", problems), problems=problems)


def _jsonl(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The whole JSON objects of a JSONL file; a torn last line (a writer mid-line) is skipped and noted."""
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        try:
            row = json.loads(line)
        except ValueError:
            problems.append(f"{path.name} line {number} is not complete JSON (skipped)")
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows
