"""SFT data: rows from a file, checked, split into train / held-out, tokenized with labels.

One JSON object per line (a .parquet file or hf:owner/name[:config] works too), in either form:

    {"prompt": "What is 2 + 3?", "completion": "5"}       prompt: text or chat messages
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]}

Other fields are ignored. Which tokens are trained is rlvr.sft.masking's rule. Rows longer than
max_length keep their first max_length tokens, as TRL truncates: the start of the conversation
stays, the completion loses its end; rows left with no completion token (the prompt alone fills
max_length) are dropped and counted. Every malformed row is a UserError naming FILE:LINE and the fix.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.data.sources import describe_value, is_messages, read_located, roles_problem  # rows: "FILE:LINE"
from rlvr.errors import UserError
from rlvr.sft.masking import encode_segments, row_segments, trained_count

FORMATS = 'one {"prompt", "completion"} or {"messages": [...]} object per line'


@dataclass(frozen=True)
class SFTExample:
    input_ids: list[int]
    labels: list[int]  # input_ids where trained, IGNORE elsewhere (same length)
    where: str = ""  # "data.jsonl:12", for messages


@dataclass
class SFTData:
    train: list[SFTExample]
    held_out: list[SFTExample]
    dropped: int  # rows whose completion max_length cut away entirely
    truncated: int  # rows cut to max_length that kept part of their completion


def read_rows(source: str) -> list[tuple[str, dict[str, Any]]]:
    """Every row of `source` with where it came from ("FILE:LINE"), each checked with `check_row`."""
    path = Path(source)
    kinds = f"give a .jsonl or .parquet file, or a folder Dataset.save_to_disk wrote, of rows: {FORMATS}"
    if not source.startswith("hf:") and not path.exists():
        raise UserError(f"SFT data not found: {source} ({kinds})")
    saved = any((path / name).is_file() for name in ("dataset_info.json", "dataset_dict.json"))
    if (path.is_file() and path.suffix not in (".jsonl", ".parquet")) or (path.is_dir() and not saved):
        what = "a folder Dataset.save_to_disk did not write" if path.is_dir() else "neither .jsonl nor .parquet"
        raise UserError(f"SFT data {source} is {what}: {kinds}")
    located = read_located(source, split="train", seed=0, difficulty=1, limit=None)
    rows = [(where, check_row(where, row)) for where, row in located]
    if not rows:
        raise UserError(f"{source} holds no rows: write {FORMATS}")
    return rows


def prepare_data(
    rows: list[tuple[str, dict[str, Any]]], tokenizer: Any, *, template: str, system_prompt: str | None,
    max_length: int, eval_fraction: float, seed: int,
) -> SFTData:
    """Split the rows (before tokenizing, so the split does not depend on the tokenizer), then encode and
    truncate them."""
    parts = split_rows(rows, eval_fraction, seed)
    encoded: tuple[list[SFTExample], list[SFTExample]] = ([], [])
    dropped = truncated = 0
    for part, out in zip(parts, encoded):
        for where, row in part:
            segments = row_segments(row, tokenizer=tokenizer, template=template, system_prompt=system_prompt,
                                    where=where)
            ids, labels = encode_segments(segments, tokenizer, add_special_tokens=template != "chat")
            if trained_count(labels[:max_length]) == 0:
                dropped += 1
                continue
            truncated += len(ids) > max_length
            out.append(SFTExample(ids[:max_length], labels[:max_length], where))
    if not encoded[0]:
        raise UserError(f"no training row keeps a completion token within max_length={max_length}: raise max_length")
    return SFTData(encoded[0], encoded[1], dropped, truncated)


def check_row(where: str, row: Any) -> dict[str, Any]:
    """The row, if it is a prompt/completion or a messages row; else a UserError with the fix.

    >>> check_row("d.jsonl:3", {"prompt": "2+2?", "answer": "4"})  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: d.jsonl:3: no 'completion' field (fields: 'prompt', 'answer');
    write one {"prompt", "completion"} or {"messages": [...]} object per line
    """
    if not isinstance(row, dict):
        raise UserError(f"{where}: expected a JSON object, got {describe_value(row)}; write {FORMATS}")
    if "messages" in row:
        if "prompt" in row or "completion" in row:
            raise UserError(f"{where}: has both 'messages' and 'prompt'/'completion'; keep one form per row")
        messages = row["messages"]
        if not is_messages(messages):
            raise UserError(f'{where}: field \'messages\' must be a non-empty list of {{"role": ..., "content": ...}} '
                            f"objects with text values, got {describe_value(messages)}")
        problem = roles_problem(messages)
        if problem:
            raise UserError(f"{where}: {problem}")
        if not any(m["role"] == "assistant" and m["content"].strip() for m in messages):
            raise UserError(f"{where}: no assistant message with text, so nothing to train on; add the assistant's "
                            "reply")
        return row
    for name in ("prompt", "completion"):
        if name not in row:
            have = ", ".join(repr(k) for k in row) or "none"
            raise UserError(f"{where}: no {name!r} field (fields: {have}); write {FORMATS}")
    if not (isinstance(row["prompt"], str) or is_messages(row["prompt"])):
        raise UserError(f"{where}: field 'prompt' must be text or a list of chat messages, "
                        f"got {describe_value(row['prompt'])}")
    if not isinstance(row["completion"], str):
        raise UserError(f"{where}: field 'completion' must be the assistant's reply as text, "
                        f"got {describe_value(row['completion'])}")
    problem = roles_problem(row["prompt"]) if isinstance(row["prompt"], list) else None
    if problem:
        raise UserError(f"{where}: field 'prompt': {problem}")
    if not row["completion"].strip():
        raise UserError(f"{where}: field 'completion' is empty, so nothing to train on; write the reply, or drop "
                        "the row")
    return row


def split_rows(rows: list[tuple[str, Any]], eval_fraction: float,
               seed: int) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """(train rows, held-out rows): the round(eval_fraction · n) rows with the smallest seeded hash
    of their content are held out (at least one when eval_fraction > 0 and n ≥ 2), whatever the file order.

    >>> rows = [(f"d:{i}", {"prompt": str(i), "completion": "x"}) for i in range(10)]
    >>> train, held = split_rows(rows, 0.2, seed=0)
    >>> len(train), len(held), split_rows(rows[::-1], 0.2, seed=0)[1] == held
    (8, 2, True)
    """
    n = len(rows)
    k = min(n - 1, max(1, round(eval_fraction * n))) if eval_fraction > 0 else 0
    ranked = sorted(range(n), key=lambda i: (_hash(rows[i][1], seed), i))
    held = set(ranked[:k])
    return [r for i, r in enumerate(rows) if i not in held], [rows[i] for i in ranked[:k]]


def _hash(row: Any, seed: int) -> str:
    return hashlib.sha256(json.dumps([seed, row], sort_keys=True, default=str).encode()).hexdigest()
