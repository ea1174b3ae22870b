"""Load prompts as `Example`s from a built-in task, a JSONL or Parquet file, or the HF Hub.

    load_examples("arithmetic", limit=500, difficulty=2)          built-in task (rlvr.data.tasks)
    load_examples("train.jsonl", prompt_field="question")         one JSON object per line
    load_examples("train.parquet")                                needs pyarrow
    load_examples("hf:openai/gsm8k:main", prompt_field="question")  needs `datasets`
    load_examples("saved/")                                       a folder written by Dataset.save_to_disk

A row's prompt field becomes `Example.prompt` (text, or a list of chat messages); every other
field goes to `Example.columns` and on to the reward functions. Every mistake in the input is a
UserError that names the file and line (or row) and what to do about it.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import itertools
import json
import random
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

from rlvr.data.hub import dataset_problem
from rlvr.data.tasks import TASKS, find_task
from rlvr.errors import UserError, first_line
from rlvr.records import Example

DEFAULT_TASK_ROWS = 1000
SUPPORTED = ("a built-in task (" + ", ".join(TASKS) + "), reasoning_gym:<task>, verifiers:<environment>, a .jsonl or "
             ".parquet file, a folder "
             "written by Dataset.save_to_disk, or hf:owner/name[:config]")

Located = tuple[str, Any]  # (where the row came from, e.g. "data.jsonl:12"; the parsed row)


def load_examples(
    source: str,
    *,
    split: str = "train",
    prompt_field: str = "prompt",
    limit: int | None = None,
    seed: int = 0,
    difficulty: int = 1,
    shuffle: bool = False,
) -> list[Example]:
    """Read `source` into Examples, optionally shuffled (seeded), then cut to `limit`.

    `split` picks the split of a built-in task or HF dataset; a local file is one split already,
    so it ignores `split`. `difficulty` applies to built-in tasks only. `Example.index` is the
    row's position in its source, kept through shuffling.

    >>> examples = load_examples("arithmetic", limit=2, difficulty=3)
    >>> len(examples), sorted(examples[0].columns)
    (2, ['answer', 'difficulty', 'task'])
    """
    if limit is not None and limit < 0:
        raise UserError(f"limit={limit} is negative; use a positive number, or none for every row")
    rows = read_located(source, split=split, seed=seed, difficulty=difficulty, limit=limit)
    if limit is not None and not shuffle:
        rows = itertools.islice(rows, limit)  # stop reading (and validating) once we have enough
    examples = [_to_example(where, row, i, prompt_field) for i, (where, row) in enumerate(rows)]
    if not examples and limit != 0:
        raise UserError(f"data source {source!r} has no rows; give a file with one example per line (or row)")
    if shuffle:
        random.Random(seed).shuffle(examples)
    return examples if limit is None else examples[:limit]


def cut_short(source: str | None, kept: int, setting: str, limit: int) -> str | None:
    """A line saying that a local file holds more rows than `setting` (its value `limit`) let through (`kept`
    of them), or None: a file of 7,473 rows trained on its first 2,000 without a word. (Other sources: None.)"""
    path = Path(source).expanduser() if source else None
    if path is None or kept < limit or not path.is_file() or path.suffix not in (".jsonl", ".parquet"):
        return None
    if path.suffix == ".jsonl":
        total = sum(1 for _ in jsonl_lines(path))
    else:
        import pyarrow.parquet as pq

        total = pq.ParquetFile(path).metadata.num_rows
    if total <= kept:
        return None
    return (f"rlvr: {setting} is {limit}: the first {kept} of the {total} rows of {source} are read (set {setting} "
            "higher to read more)")


def with_every_column(examples: list[Example]) -> list[Example]:
    """The rows as a table: a column any row has, every row has (None where the row lacks it, as in a
    Parquet file), so a reward is called with the same keywords whichever rows one call holds.

    >>> [ex.columns for ex in with_every_column([Example("a", {"answer": "1"}), Example("b", {"level": 2})])]
    [{'answer': '1', 'level': None}, {'answer': None, 'level': 2}]
    """
    names = dict.fromkeys(name for ex in examples for name in ex.columns)  # (a dict keeps the first-seen order)
    if all(len(ex.columns) == len(names) for ex in examples):
        return examples
    return [dataclasses.replace(ex, columns={name: ex.columns.get(name) for name in names}) for ex in examples]


def read_located(source: str, *, split: str, seed: int, difficulty: int, limit: int | None) -> Iterator[Located]:
    """Dispatch on the kind of source; rows come back lazily with their location."""
    task = find_task(source)
    if task is not None:
        n = DEFAULT_TASK_ROWS if limit is None else limit
        rows = task.generate(n, split=split, seed=seed, difficulty=difficulty)
        return ((f"{source} row {i}", row) for i, row in enumerate(rows))
    if source.startswith("hf:"):
        return _read_hf(source, split)
    if source.startswith("verifiers:"):  # a verifiers environment's own dataset (rlvr.adapters.verifiers_env)
        from rlvr.adapters import verifiers_env

        found = verifiers_env.rows(verifiers_env.load(source), split)
        return ((f"{source} ({split}) row {i}", row) for i, row in enumerate(found))
    check_source(source)
    path = Path(source)
    if path.suffix == ".jsonl":
        return _read_jsonl(path)
    if path.suffix == ".parquet":
        return _read_parquet(path)
    if path.is_dir():
        return _read_saved(path, split)
    raise UserError(f"data file {source!r} has an unsupported extension {path.suffix!r}; give {SUPPORTED}")


def check_source(source: str) -> None:
    """A source that names a file or folder (not a task, hf: or verifiers:) that does not exist is a UserError.
    Cheap: the command line asks it before torch loads."""
    if find_task(source) is None and not source.startswith(("hf:", "verifiers:")) and not Path(source).exists():
        raise UserError(f"data source {source!r} does not exist{_task_hint(source)}; give {SUPPORTED}")


def _task_hint(source: str) -> str:
    """' (did you mean task 'x'?)' when a missing path looks like a misspelt task name."""
    close = difflib.get_close_matches(source, TASKS, n=1)
    return f" (did you mean task {close[0]!r}?)" if close else ""


def _read_jsonl(path: Path) -> Iterator[Located]:
    """Yield each non-blank line's object; a line that is not JSON is a UserError naming it."""
    for number, line in jsonl_lines(path):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{path}:{number}: not valid JSON ({error}); write one JSON object per line") from None
        yield f"{path}:{number}", row


def jsonl_lines(path: Path) -> Generator[tuple[int, str], None, None]:
    """(line number, text) of each non-blank line; a line that is not UTF-8 is a UserError naming it."""
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise UserError(f"{path}:{number}: byte {raw[error.start]:#04x} at column {error.start + 1} is not "
                                "UTF-8; save the file as UTF-8") from None
            if line.strip():
                yield number, line


def _read_parquet(path: Path) -> Iterator[Located]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError(f"reading {path} needs pyarrow: pip install pyarrow (or use a .jsonl file)") from None
    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise UserError(f"{path} is not a readable Parquet file ({str(error).splitlines()[0][:160]}); "
                        "write it with pandas/pyarrow, or use a .jsonl file") from None
    return ((f"{path} row {i}", row) for i, row in enumerate(rows))


def _read_saved(path: Path, split: str) -> Iterator[Located]:
    """A folder written by `Dataset.save_to_disk` (or a DatasetDict's: its `split`, else its only split)."""
    datasets = importlib.import_module("datasets")
    try:
        saved = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as error:
        raise UserError(f"{path} is a folder but not one written by Dataset.save_to_disk ({first_line(error)}); "
                        f"give {SUPPORTED}") from None
    if isinstance(saved, datasets.DatasetDict):
        if split not in saved and len(saved) != 1:
            raise UserError(f"{path} holds the splits {sorted(saved)}, not {split!r}: give the folder of one split")
        saved = saved[split] if split in saved else next(iter(saved.values()))
    return ((f"{path} row {i}", row) for i, row in enumerate(saved))


def _read_hf(source: str, split: str) -> Iterator[Located]:
    """hf:owner/name or hf:owner/name:config through `datasets.load_dataset`, an optional extra."""
    name, _, config = source.removeprefix("hf:").partition(":")
    if not name:
        raise UserError(f"data source {source!r} names no dataset; write hf:owner/name or hf:owner/name:config")
    try:
        datasets = importlib.import_module("datasets")
    except ImportError:
        raise UserError(
            f"data source {source!r} needs the `datasets` package: pip install datasets, "
            "or save the data as a local .jsonl or .parquet file"
        ) from None
    problem = dataset_problem(name)
    if problem is not None:
        raise UserError(f"could not load {name!r} (split {split!r}) from the Hugging Face Hub: {problem}; "
                        "use a local .jsonl/.parquet copy")
    try:
        rows = datasets.load_dataset(name, config or None, split=split)
    except Exception as error:  # offline, unknown name, missing split: one line, not the library's traceback
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        raise UserError(f"could not load {name!r} (split {split!r}) from the Hugging Face Hub: "
                        f"{type(error).__name__}: {first}; "
                        "check the name and the network, or use a local .jsonl/.parquet copy") from None
    return ((f"{source} ({split}) row {i}", row) for i, row in enumerate(rows))


def _to_example(where: str, row: Any, index: int, prompt_field: str) -> Example:
    """Check one row and split it into prompt and columns."""
    if not isinstance(row, dict):
        raise UserError(f"{where}: expected a JSON object with a {prompt_field!r} field, got {type(row).__name__}")
    if prompt_field not in row:
        have = ", ".join(repr(k) for k in row) or "none"
        raise UserError(
            f"{where}: no {prompt_field!r} field (columns: {have}); name the column holding the prompt with "
            "data.prompt_field (from Python: data={'prompt_field': ...})"
        )
    prompt = row[prompt_field]
    _check_prompt(where, prompt_field, prompt)
    columns = {k: v for k, v in row.items() if k != prompt_field}
    return Example(prompt=prompt, columns=columns, index=index)


def _check_prompt(where: str, field: str, prompt: Any) -> None:
    """A prompt is text or a non-empty list of {"role": str, "content": str} messages."""
    if isinstance(prompt, str) or is_messages(prompt):
        return
    raise UserError(
        f"{where}: field {field!r} must be text or a list of chat messages "
        f'[{{"role": ..., "content": ...}}], got {describe_value(prompt)}'
    )


ROLES = ("system", "user", "assistant", "tool")


def roles_problem(messages: list[dict[str, Any]]) -> str | None:
    """Why chat `messages` (already `is_messages`) are no conversation a chat template renders as meant, or None:
    a role that is none of ROLES, or a reply of the assistant's with no user's message before it.

    >>> roles_problem([{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}])
    "message 2 has the role 'robot', not one of system, user, assistant, tool"
    >>> roles_problem([{"role": "assistant", "content": "yo"}, {"role": "user", "content": "hi"}])
    "message 1 is the assistant's with no user's message before it: start the conversation with the user's"
    """
    for i, m in enumerate(messages, 1):
        if m["role"] not in ROLES:
            return f"message {i} has the role {m['role']!r}, not one of {', '.join(ROLES)}"
    first = next((i for i, m in enumerate(messages) if m["role"] in ("user", "assistant")), None)
    if first is not None and messages[first]["role"] == "assistant":
        return (f"message {first + 1} is the assistant's with no user's message before it: start the conversation "
                "with the user's")
    return None


def is_messages(value: Any) -> bool:
    """Whether `value` is a non-empty list of {"role": str, "content": str} chat messages.

    >>> is_messages([{"role": "user", "content": "hi"}]), is_messages([]), is_messages("hi")
    (True, False, False)
    """
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in value)
    )


def describe_value(value: Any) -> str:
    """Short description of a bad value for an error message (never the whole value).

    >>> describe_value(7), describe_value("x" * 100)[-6:]
    ('int 7', 'xxx...')
    """
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
