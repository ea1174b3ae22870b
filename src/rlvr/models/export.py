"""``rlvr export RUN_DIR --output DIR [--merge]`` (its parser: rlvr.cli): a run's latest model as a folder
other tools load.

A full fine-tune's model/ is copied as it is (transformers' `from_pretrained`). A LoRA run's model/ holds
adapters: copied as they are (peft, transformers with peft installed, or vLLM's LoRA support load them on
the base their adapter_config.json names), or with `--merge` folded into the base weights,
W + (α / r) · B A, as a plain transformers checkpoint that needs neither peft nor rlvr.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from rlvr.errors import UserError, first_line, for_caller
from rlvr.models.files import match_umask


def export_model(source: Path, output: Path, *, merge: bool, cache_dir: str = "~/.cache/rlvr") -> str:
    """Write `source`'s model into `output` (atomically: a folder named `output` is complete); what was
    written, in words."""
    from rlvr.models.adapters import ADAPTER_CONFIG, is_adapter_dir
    from rlvr.models.loading import find_model_dir

    source, output = source.expanduser(), output.expanduser()
    folder = find_model_dir(source) if source.exists() else None
    if folder is None:
        raise UserError(f"no model in {source}: give a run directory, one of its checkpoints/step-N folders, "
                        "or a model/ folder")
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        what = "is a file" if not output.is_dir() else "exists and is not empty"
        raise UserError(f"{output} {what}: give a new folder ({for_caller('--output', 'save(path)')})")
    tmp = output.with_name(f".{output.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    adapters = is_adapter_dir(folder)
    try:
        if adapters and merge:
            _write_merged(folder, tmp, cache_dir)
        else:
            shutil.copytree(folder, tmp, ignore=shutil.ignore_patterns("README.md"))
        match_umask(tmp)  # weights readable as the other files are (safetensors, or a checkpoint, has 0600)
        if output.is_dir():
            output.rmdir()
        tmp.rename(output)
    except BaseException as error:  # nothing half-written stays behind
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(error, OSError):  # a full disk, a folder it may not write to
            raise UserError(f"could not write {output}: {first_line(error)} (free some space or choose another "
                            "--output; nothing was left there)") from None
        raise
    if not adapters:  # (a plain checkpoint already: what merging would make)
        return f"the model of {folder}{' (it has no adapters: there was nothing to merge)' if merge else ''}"
    if merge:
        return f"the base model with the adapters of {folder} merged into it"
    base = json.loads((folder / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    return f"the adapters of {folder} (for the base {base})"


def _write_merged(folder: Path, target: Path, cache_dir: str) -> None:
    from rlvr.models.loading import load_model

    model, tokenizer = load_model(str(folder), cache_dir)  # merged: a plain transformers model
    model.save_pretrained(target)  # type: ignore[operator]  # (a transformers model)
    tokenizer.save_pretrained(target)
