"""What a Python caller hands over in memory, made into files a run reads and keeps (RUN_DIR/inputs/):

    a datasets.Dataset / IterableDataset, a list of dicts, a pandas DataFrame ─▶ inputs/NAME.jsonl
    a loaded transformers model (+ its tokenizer)                             ─▶ inputs/model/
    a function or class of a script or notebook                               ─▶ inputs/code/ (its source)

A path, a built-in task's name or `hf:owner/name` is used as it is. So the run directory holds what it
was trained on, config.yaml names those files, and a resumed run reads the same rows: resuming with rows
that differ from the snapshot is one line.
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rlvr import paths
from rlvr.errors import UserError, a_kind
from rlvr.evaluate.store import write_atomic
from rlvr.models.loading import check_vocabulary
from rlvr.samplers.protocol import weights_fingerprint

INPUTS = paths.INPUTS
DATA_KINDS = "a datasets.Dataset or IterableDataset, a list of dicts, a pandas DataFrame, a file path or a folder " \
             "written by Dataset.save_to_disk"


def is_given_in_memory(data: Any) -> bool:
    """Whether `data` is rows in memory rather than a name or a path."""
    return data is not None and not isinstance(data, (str, os.PathLike))


def data_file(data: Any, folder: Path, name: str, limit: int, resume: bool) -> str | None:
    """`data` as a source a config names: a name or path as it is; rows in memory written to
    folder/NAME.jsonl (the first `limit` of an IterableDataset); resuming, checked against that file."""
    if not is_given_in_memory(data):
        return None if data is None else str(data)
    text = "".join(_line(row, number, name) for number, row in enumerate(_rows(data, limit, name), start=1))
    if not text:
        raise UserError(f"the {name} data has no rows: give at least one")
    path = folder / f"{name}.jsonl"
    if resume and path.is_file():
        if path.read_text(encoding="utf-8") != text:
            raise UserError(f"the {name} data given differs from the rows {folder.parent} was started with ({path}): "
                            "give the same rows to continue there, or another output_dir")
        return str(path)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
    return str(path)


def _rows(data: Any, limit: int, name: str) -> Iterable[Any]:
    kind = type(data).__name__
    if kind in ("DatasetDict", "IterableDatasetDict"):
        raise UserError(f"the {name} data is a {kind} of splits {sorted(data)}: give one split, e.g. "
                        f"dataset[{next(iter(sorted(data)), 'train')!r}]")
    if kind == "IterableDataset":  # (a stream may not end: the rows the run can use)
        return itertools.islice(data, limit)
    if kind == "DataFrame":
        return data.to_dict("records")  # type: ignore[no-any-return]
    if kind == "Dataset" or isinstance(data, (list, tuple)):
        return data  # type: ignore[no-any-return]
    raise UserError(f"the {name} data is a {kind}: give {DATA_KINDS}")


def _line(row: Any, number: int, name: str) -> str:
    if not isinstance(row, dict):
        raise UserError(f"row {number} of the {name} data is {a_kind(row)}, not a mapping of columns "
                        "(give rows such as {'prompt': ..., 'answer': ...})")
    try:
        return json.dumps(row, ensure_ascii=False, default=_plain) + "\n"
    except (TypeError, ValueError) as e:
        raise UserError(f"row {number} of the {name} data cannot be written as JSON ({e}): give text, numbers, "
                        "lists and mappings") from None


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (what pandas and datasets hand back) as plain numbers and lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"a {type(value).__name__} in a column")


def check_model_argument(model: Any) -> None:
    """The first argument, checked when the run is made: rows or a dataset given there are one line saying so."""
    if model is None or isinstance(model, (str, os.PathLike)) or hasattr(model, "save_pretrained"):
        return
    if isinstance(model, (list, tuple, dict)) or type(model).__name__ in ("Dataset", "IterableDataset", "DataFrame"):
        raise UserError(f"model is {a_kind(model)}: the first argument is the model (a name, a checkpoint folder or "
                        "a transformers model); give the rows as train_data=")
    raise UserError(f"model is {a_kind(model)}: give a name (smollm2, a hub id), a checkpoint folder or a "
                    "transformers PreTrainedModel")


def model_source(model: Any, tokenizer: Any, folder: Path, resume: bool) -> str:
    """`model` as a name the config holds: a name or path as it is; a loaded transformers model saved with its
    tokenizer to folder/model (once: a resumed run keeps the copy it started from, which must be of the same
    weights: their fingerprint is kept beside it)."""
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    if hasattr(model, "peft_config"):
        raise UserError("the model is a peft model: give its base model, and the adapters' settings as "
                        "config model.lora (or peft_config= with rlvr.trl)")
    check_model_argument(model)  # (a loaded transformers model, from here on)
    target, mark = folder / "model", folder / "model.fingerprint"
    given = weights_fingerprint(model.state_dict().items())
    if resume and (target / "config.json").is_file():
        if mark.is_file() and mark.read_text().strip() != given:  # (the same folder, another model's weights)
            raise UserError(f"{folder.parent} holds the work of another model than the one given (its weights "
                            f"differ from the copy in {target}): give another output_dir, or delete {folder.parent}")
        return str(target)
    tokenizer = tokenizer if tokenizer is not None else _its_tokenizer(model)
    check_vocabulary(model, tokenizer, "the given model")  # (before it is saved: a resume would fail alike)
    staging = folder / "model.partial"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
    except Exception as e:  # (a quantized model transformers cannot save, a full disk)
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"could not save the given model into {target} ({type(e).__name__}: {e}); give its name or "
                        "folder instead") from None
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    mark.write_text(given + "\n")
    return str(target)


def _its_tokenizer(model: Any) -> Any:
    from transformers import AutoTokenizer

    source = getattr(model, "name_or_path", "") or ""
    try:
        return AutoTokenizer.from_pretrained(source)
    except Exception:  # (not saved anywhere, offline)
        raise UserError(f"no tokenizer for the given model (its name_or_path {source!r} has none that loads): pass "
                        "its tokenizer (tokenizer= to rlvr.GRPO, processing_class= to rlvr.trl.GRPOTrainer)") from None


def keep_sources(specs: list[str], folder: Path) -> None:
    """A copy of the code behind the names that only this process resolves (a script's or a notebook's
    functions) in folder/code/: the script itself, or the object's source. For the record: another process
    cannot import them (rlvr.user_code)."""
    from rlvr.user_code import registered

    made_here = {spec: registered(spec) for spec in specs if spec.split(":")[0] == "__main__" or "<" in spec}
    if not made_here:
        return
    code = folder / "code"
    code.mkdir(parents=True, exist_ok=True)
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if script and Path(script).is_file():
        shutil.copyfile(script, code / Path(script).name)
        return
    for spec, obj in made_here.items():
        try:
            source = inspect.getsource(obj)
        except (OSError, TypeError):  # (a lambda typed at a prompt, a builtin)
            continue
        write_atomic(code / f"{spec.rpartition(':')[2].replace('<', '').replace('>', '')}.py", source)
