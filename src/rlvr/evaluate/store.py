"""The evaluation's output directory, and resuming into it.

    DIR/settings.json   everything that decides the numbers (model, data, template, sampling, verifiers, seed)
    DIR/samples.jsonl   one ProblemRecord per line, appended (and flushed to disk) as chunks finish
    DIR/summary.json, DIR/report.md, DIR/curves.png   written at the end (report.py)

Re-running with the same settings skips the problems already in samples.jsonl. A line cut short
by a crash is dropped (and the file truncated back to the last whole line), so nothing half-written
is ever read as a result. Different settings in an existing directory are refused: mixing them
would quote numbers no single configuration produced.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rlvr import paths
from rlvr.errors import UserError
from rlvr.evaluate.records import ProblemRecord

# Settings that may change between runs into one directory without changing any stored record
# (k only changes which numbers the summary computes from the records).
RESUMABLE = ("limit", "problems", "k")
# Settings that older versions did not record: compared only where the stored settings hold them
RECORDED_SINCE = ("model_files", "origin_sha256")
# what a setting that differs means, where its name does not say
MEANING = {"model_files": "the weights {model} loads (a run folder gives its newest checkpoint) are not those it "
                          "evaluated",
           "origin_sha256": "the data file {origin} changed since"}


class EvalStore:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.samples_path = directory / "samples.jsonl"
        self.settings_path = directory / "settings.json"

    def open(self, settings: dict[str, Any]) -> dict[str, ProblemRecord]:
        """Record `settings` (or check them against the stored ones); return the finished problems by id."""
        if paths.checkpoint_dir(self.dir).is_dir() or (self.dir / paths.CONFIG).is_file():
            raise UserError(f"{self.dir} is a training run's directory (it holds {paths.CHECKPOINTS}/ or "
                            f"{paths.CONFIG}): its summary.json and samples.jsonl would be replaced; give another "
                            "--output-dir")
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.settings_path.exists() and self.read():  # settings without any result bind nothing
            stored = json.loads(self.settings_path.read_text(encoding="utf-8"))
            _check_same(stored, settings, self.dir)
        write_atomic(self.settings_path, json.dumps(settings, indent=2, default=str) + "\n")
        return {r.id: r for r in self.read()}

    def read(self) -> list[ProblemRecord]:
        """Every whole record in samples.jsonl (a torn last line is cut off)."""
        if not self.samples_path.exists():
            return []
        records: list[ProblemRecord] = []
        good_bytes = 0
        with self.samples_path.open("rb") as lines:
            for line in lines:
                if not line.endswith(b"\n"):
                    break  # written by a run that died mid-line
                try:
                    records.append(ProblemRecord.from_json(json.loads(line)))
                except (ValueError, KeyError, TypeError):
                    raise UserError(f"{self.samples_path} has a corrupt record after {len(records)} problems: "
                                    "delete the file (or the directory) to start the evaluation again") from None
                good_bytes += len(line)
        if good_bytes != self.samples_path.stat().st_size:
            with self.samples_path.open("r+b") as f:
                f.truncate(good_bytes)
        return records

    def append(self, records: list[ProblemRecord]) -> None:
        """Add finished problems; on disk before this returns."""
        with self.samples_path.open("a", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def write(self, name: str, text: str | bytes) -> Path:
        path = self.dir / name
        write_atomic(path, text)
        return path


def _check_same(stored: dict[str, Any], settings: dict[str, Any], directory: Path) -> None:
    differ = sorted(k for k in set(stored) | set(settings)
                    if k not in RESUMABLE and (k in stored or k not in RECORDED_SINCE)
                    and stored.get(k) != json.loads(json.dumps(settings.get(k), default=str)))
    if differ:
        changes = "; ".join(MEANING[k].format(**settings) if k in MEANING else
                            f"{k}: {stored.get(k)!r} there, {settings.get(k)!r} now" for k in differ[:3])
        raise UserError(
            f"{directory} holds an evaluation with other settings ({changes}): "
            f"use another --output-dir, or delete {directory} to start over"
        )


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write to a temporary file beside `path`, then rename: readers see the old or the new file, never half."""
    tmp = path.with_name(f".{path.name}.tmp")
    data = text.encode("utf-8") if isinstance(text, str) else text
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
