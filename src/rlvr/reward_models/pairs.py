"""Preference pairs: one JSON object per line with a prompt and a chosen and a rejected completion.

    {"prompt": "Name a prime.", "chosen": "7", "rejected": "8"}
    {"prompt": [{"role": "user", "content": "Name a prime."}], "chosen": "7", "rejected": "9"}

The prompt is text or a list of chat messages; chosen and rejected are the assistant's reply as
text. Every malformed row is a UserError naming FILE:LINE and the fix.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.data.sources import describe_value, is_messages, jsonl_lines, read_located, roles_problem
from rlvr.errors import UserError
from rlvr.records import Prompt

FIELDS = ("prompt", "chosen", "rejected")


@dataclass(frozen=True)
class PreferencePair:
    prompt: Prompt
    chosen: str  # the completion preferred by the labeller
    rejected: str
    where: str = ""  # "pairs.jsonl:12": where the row came from, for messages


def load_pairs(path: str | Path) -> list[PreferencePair]:
    """Every non-blank line of a .jsonl file, or every row of a .parquet file or a `save_to_disk` folder, as a
    PreferencePair."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"preference file not found: {path} (give a .jsonl file of prompt/chosen/rejected rows, "
                        "a .parquet file or a folder Dataset.save_to_disk wrote)")
    if path.suffix == ".jsonl":
        pairs = [parse_pair(line, f"{path}:{number}") for number, line in jsonl_lines(path)]
    elif path.is_dir() or path.suffix == ".parquet":
        located = read_located(str(path), split="train", seed=0, difficulty=1, limit=None)
        pairs = [pair_from_row(row, where) for where, row in located]
    else:
        raise UserError(f"preference file {path} must be .jsonl (one {{\"prompt\", \"chosen\", \"rejected\"}} "
                        "object per line), .parquet, or a folder Dataset.save_to_disk wrote")
    if not pairs:
        raise UserError(f"{path} holds no preference pairs: "
                        "write one {\"prompt\", \"chosen\", \"rejected\"} object per line")
    return pairs


def parse_pair(line: str, where: str) -> PreferencePair:
    """One JSONL line as a pair; `where` (FILE:LINE) starts every error message.

    >>> parse_pair('{"prompt": "2+2?", "chosen": "4", "rejected": "5"}', "p.jsonl:1").chosen
    '4'
    >>> parse_pair('{"prompt": "2+2?", "chosen": "4"}', "p.jsonl:2")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: p.jsonl:2: no 'rejected' field (fields: 'prompt', 'chosen');
    each row needs prompt, chosen and rejected
    """
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise UserError(f"{where}: not valid JSON ({error}); write one JSON object per line") from None
    return pair_from_row(row, where)


def pair_from_row(row: Any, where: str) -> PreferencePair:
    """One row (a JSON object, a dataset's row) as a pair, checked; `where` starts every error message."""
    if not isinstance(row, dict):
        raise UserError(f"{where}: expected a JSON object with prompt, chosen and rejected, got {describe_value(row)}")
    for name in FIELDS:
        if name not in row:
            have = ", ".join(repr(k) for k in row) or "none"
            raise UserError(f"{where}: no {name!r} field (fields: {have}); each row needs prompt, chosen and rejected")
    if not (isinstance(row["prompt"], str) or is_messages(row["prompt"])):
        raise UserError(
            f"{where}: field 'prompt' must be text or a list of chat messages "
            f'[{{"role": ..., "content": ...}}], got {describe_value(row["prompt"])}'
        )
    problem = roles_problem(row["prompt"]) if isinstance(row["prompt"], list) else None
    if problem:
        raise UserError(f"{where}: field 'prompt': {problem}")
    for name in ("chosen", "rejected"):
        if not isinstance(row[name], str):
            raise UserError(f"{where}: field {name!r} must be the completion's text, got {describe_value(row[name])}")
        if not row[name].strip():
            raise UserError(f"{where}: field {name!r} is empty; write the completion, or drop the row")
    if row["chosen"] == row["rejected"]:
        raise UserError(f"{where}: 'chosen' and 'rejected' are the same text, which teaches no preference; drop the "
                        "row")
    return PreferencePair(row["prompt"], row["chosen"], row["rejected"], where)


def split_pairs(pairs: list[PreferencePair], eval_fraction: float,
                seed: int) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """(training pairs, held-out pairs): the round(eval_fraction · n) pairs with the smallest
    seeded hash of their content are held out (at least one when eval_fraction > 0 and n ≥ 2).

    The choice depends on the rows and the seed, not on their order in the file.

    >>> pairs = [PreferencePair("p", f"good {i}", f"bad {i}") for i in range(10)]
    >>> train, held_out = split_pairs(pairs, 0.2, seed=0)
    >>> len(train), len(held_out), split_pairs(pairs[::-1], 0.2, seed=0)[1] == held_out
    (8, 2, True)
    """
    if not 0 <= eval_fraction < 1:
        raise UserError(f"eval_fraction={eval_fraction} must be in [0, 1)")
    n = len(pairs)
    k = min(n - 1, max(1, round(eval_fraction * n))) if eval_fraction > 0 else 0
    ranked = sorted(range(n), key=lambda i: (_hash(pairs[i], seed), i))
    held = set(ranked[:k])
    held_out = [pairs[i] for i in ranked[:k]]
    return [p for i, p in enumerate(pairs) if i not in held], held_out


def _hash(pair: PreferencePair, seed: int) -> str:
    content = json.dumps([seed, pair.prompt, pair.chosen, pair.rejected], sort_keys=True)
    return hashlib.sha256(content.encode()).hexdigest()
