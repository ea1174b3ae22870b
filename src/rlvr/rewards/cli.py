"""``rlvr grade``: score a JSONL file of completions with any reward or grader, row by row, and say why.

Each input line is a JSON object with a ``completion`` (a string, or chat messages) and the
columns the grader reads (``answer`` for math, ``numbers`` + ``target`` for countdown, ``tests``
or ``test`` + ``entry_point`` for code, anything a spec's templates name). Each output line is
that object plus ``reward`` (a number, or null when not scored) and a short ``reason``; a line
that is not such an object is reported as ``FILE:LINE: problem`` on stderr, written with a null
reward, and the rest are still graded. Output lines follow input lines one to one (blank lines
are skipped).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.combine import grade_rows
from rlvr.rewards.graders.build import VERIFIER_TYPES, load_grader
from rlvr.rewards.graders.python import FAILED as GRADER_FAILED
from rlvr.rewards.graders.template import MISSING
from rlvr.rewards.loading import load_reward_function
from rlvr.rewards.scores import GradeResult
from rlvr.rewards.text import completion_text

RewardFn = Callable[..., Any]


@dataclass
class Row:
    """One non-blank input line: the object read from it, or the problem that stopped that."""

    line: int  # 1-based line number in the input file
    data: dict[str, Any]  # the row as read; {"line": N} when it is not a JSON object
    completion: str | None = None  # None when the row is malformed
    problem: str | None = None
    error: str | None = None  # what the grader raised on this row (an unreachable judge, a bug): not scored


@dataclass
class Tally:
    """Counts for the summary."""

    rows: int = 0
    malformed: int = 0
    rewards: list[float] = field(default_factory=list)
    failed: int = 0  # rows the grader itself failed on (scored 0, reason "grader failed ..."; or raised: null)
    raised: int = 0  # of those, the rows it raised on (null)
    first_failure: str | None = None
    lacking: int = 0  # rows without a field the grader's templates name (null)
    first_lacking: str | None = None
    columns: set[str] = field(default_factory=set)  # of the well-formed rows

    def count(self, row: Row, value: float | None) -> None:
        self.rows += 1
        self.malformed += row.problem is not None
        if value is not None:
            self.rewards.append(value)
        reason = str(row.data.get("reason", ""))
        if row.problem is None:
            self.columns |= set(row.data) - {"reward", "reason"}
        if row.problem is None and value is None and MISSING in reason:
            self.lacking += 1
            self.first_lacking = self.first_lacking or f"line {row.line}: {reason}"
        if row.problem is None and (reason.startswith(GRADER_FAILED) or row.error is not None):
            self.failed += 1
            self.raised += row.error is not None
            self.first_failure = self.first_failure or f"line {row.line}: {reason}"

    def summary(self, name: str, source: str, output: str, seconds: float) -> str:
        skipped = self.rows - len(self.rewards)
        mean = f"{sum(self.rewards) / len(self.rewards):.4f}" if self.rewards else "n/a"
        zeros = self.failed - self.raised
        failed = f" ({zeros} of them 0 because the grader failed: see 'reason')" if zeros else ""
        raised = f", {self.raised} the grader raised on" if self.raised else ""
        return (
            f"graded {self.rows} rows of {source} with '{name}' in {seconds:.1f}s: "
            f"{len(self.rewards)} scored{failed}, {skipped} skipped (null; {self.malformed} malformed{raised}), "
            f"mean reward {mean}; wrote {output}"
        )


def add_grade_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``grade`` to the ``rlvr`` command's subparsers; run it with `run_grade`."""
    parser = subparsers.add_parser(
        "grade", help="score completions in a JSONL file with a grader (a spec file or a built-in)"
    )
    parser.add_argument(
        "--grader", required=True, metavar="SPEC",
        help=f"a YAML or JSON grader spec file, inline JSON, a verifier ({', '.join(VERIFIER_TYPES)}), "
             "any built-in reward, or module:function / file.py:function",
    )
    parser.add_argument(
        "--input", required=True, metavar="ROWS.jsonl", help="one JSON object per line, with 'completion'"
    )
    parser.add_argument("--output", required=True, metavar="SCORED.jsonl", help="the rows plus 'reward' and 'reason'")
    parser.add_argument("--batch-size", type=int, default=64, help="rows graded per call to the grader (default 64)")
    return parser


def run_grade(args: argparse.Namespace) -> int:
    """Grade every row of ``args.input`` into ``args.output`` and print a summary; 0 when done."""
    start = time.perf_counter()
    name, reward = load_any(args.grader)  # a bad spec fails here, before the output is touched
    source, output = Path(args.input), Path(args.output)
    if source.is_dir():
        raise UserError(f"--input {source} is a folder: give a JSONL file with one row per line")
    if not source.is_file():
        raise UserError(f"input file {source} not found (give a JSONL file with one row per line)")
    if output.resolve() == source.resolve():
        raise UserError(f"--output {output} is the input file (write the scores to another file)")
    if args.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, got {args.batch_size}")
    output.parent.mkdir(parents=True, exist_ok=True)
    tally = Tally()
    with source.open("rb") as lines, output.open("w", encoding="utf-8") as out:
        for batch in _batches(read_rows(lines, str(source)), args.batch_size):
            for row, value in zip(batch, grade_batch(name, reward, batch), strict=True):
                out.write(json.dumps(row.data, ensure_ascii=False) + "\n")
                tally.count(row, value)
    print(tally.summary(name, str(source), str(output), time.perf_counter() - start))
    graded = tally.rows - tally.malformed
    if graded and tally.failed == graded:
        raise UserError(f"grader '{name}' failed on every row, so the scores mean nothing "
                        f"(first, {tally.first_failure}): fix the grader")
    if graded and tally.lacking == graded:  # (a template's misspelt field: every row null, exit 0 before)
        raise UserError(f"no row of {source} has a field grader '{name}' reads (first, {tally.first_lacking}); "
                        f"its rows have {', '.join(sorted(tally.columns))}: fix the template or the file")
    if tally.rows and tally.malformed == tally.rows:
        raise UserError(f"no row of {source} could be graded (all {tally.rows} are malformed: see the lines above)")
    if not tally.rows:
        raise UserError(f"{source} holds no rows (give a JSONL file with one object per line, each with 'completion')")
    return 0


def read_rows(lines: Iterable[bytes], source: str) -> Iterator[Row]:
    """The non-blank lines as rows; each malformed one is reported on stderr and yielded with its problem."""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        row = parse_row(raw, number)
        if row.problem is not None:
            print(f"{source}:{number}: {row.problem}", file=sys.stderr)
        yield row


def parse_row(raw: bytes, number: int) -> Row:
    """One input line as a row, or a row holding the problem with it.

    >>> parse_row(b'{"completion": "4", "answer": "4"}', 1).completion
    '4'
    >>> parse_row(b'{"completion": }', 2).problem
    'invalid JSON (Expecting value at column 16)'
    >>> parse_row(b'{"answer": "4"}', 3).problem
    "no 'completion' field (add the text to grade as 'completion')"
    """
    try:
        data = json.loads(raw.decode("utf-8").rstrip())  # rstrip: an error at the end is on this line
    except UnicodeDecodeError:
        return Row(number, {"line": number}, problem="not UTF-8 text")
    except json.JSONDecodeError as e:
        return Row(number, {"line": number}, problem=f"invalid JSON ({e.msg} at column {e.colno})")
    if not isinstance(data, dict):
        return Row(number, {"line": number}, problem=f"a JSON {type(data).__name__}, not an object")
    if "completion" not in data:
        return Row(number, data, problem="no 'completion' field (add the text to grade as 'completion')")
    try:
        return Row(number, data, completion=completion_text(data["completion"]))
    except UserError:
        return Row(number, data, problem="'completion' is neither text nor a list of chat messages")


def load_any(text: str) -> tuple[str, RewardFn]:
    """(label, reward function) for `--grader`: an inline JSON spec or a grader type's name (as a grader:
    a malformed row is scored None with the problem, not a stop), else anything the reward loader takes."""
    text = text.strip()
    reward = load_grader(text) if text.startswith("{") or text in VERIFIER_TYPES else load_reward_function(text)
    return getattr(reward, "__name__", text), reward


def grade_batch(name: str, reward: RewardFn, rows: list[Row]) -> list[float | None]:
    """Grade the well-formed rows, set ``reward`` and ``reason`` on every row, return the rewards.

    The rows go in one call; when that call fails on a malformed row, they go one by one, so only
    that row is lost (with the problem as its reason)."""
    good = [row for row in rows if row.completion is not None]
    # as training hands them over (TRL's form): a conversation's completion as the assistant's message
    texts: list[Any] = [[{"role": "assistant", "content": row.completion or ""}] if any(
        isinstance(row.data.get(k), list) for k in ("prompt", "completion")) else row.completion or "" for row in good]
    try:
        results = grade_rows(name, reward, texts, [dict(row.data) for row in good]) if good else []
    except UserError:
        results = []
        for text, row in zip(texts, good, strict=True):
            try:
                results += grade_rows(name, reward, [text], [dict(row.data)])
            except UserError as e:
                results.append(GradeResult(None, str(e)))
                row.error = str(e)
    by_line = {row.line: result for row, result in zip(good, results, strict=True)}
    rewards = []
    for row in rows:
        result = by_line.get(row.line)
        value = None if result is None else result.reward
        row.data.update(reward=value, reason=row.problem if result is None else result.reason)
        rewards.append(value)
    return rewards


def _batches(rows: Iterable[Row], size: int) -> Iterator[list[Row]]:
    batch: list[Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
