"""Whether a checkpoint's files are whole: cheap checks that catch a file cut short, missing or overwritten.

A checkpoint is complete when it is renamed into place (rlvr.run.checkpoint), but a copy that stopped
half-way, a full disk during a sync or a stray write can break it afterwards. These checks read the files'
headers and indexes, never the weights themselves:

    config.yaml             present
    trainer.pt, rng/*.pt    a zip that torch.save wrote, whose pickle loads (its tensors mapped, not read);
                            trainer.pt holds the step
    *.safetensors           the header parses, and the file is as long as its last tensor's data ends
    model/                  holds weights, and the files its *.safetensors.index.json lists
    dcp/                    its .metadata loads, and each part is as long as the metadata says
    manifest.json           (written last at save) every file it lists is there, as long as it was, and each
                            one up to 64 MiB (all but the weights) has the sha256 it had: a config, tokenizer or
                            chat template cut short or changed since is found before a resume reads it

The same files give the same answer wherever they are checked, so the ranks of a run, each checking on
its own, choose the same checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

from rlvr import paths
from rlvr.errors import first_line

Problem = Callable[[Path], "str | None"]


def checkpoint_problem(checkpoint: Path) -> str | None:
    """What makes `checkpoint` unusable to resume from, naming its file; None when it is intact."""
    if not (checkpoint / paths.CONFIG).is_file():
        return f"{paths.CONFIG} is missing"
    problem = _torch_problem(checkpoint / paths.TRAINER_STATE, checkpoint, key="step")
    for rng in sorted((checkpoint / paths.RANK_RNG).glob("*.pt")):
        problem = problem or _torch_problem(rng, checkpoint)
    model = checkpoint / paths.MODEL
    problem = problem or model_problem(model, checkpoint)
    if not problem and not any(model.glob("*.safetensors")) and not any(model.glob("*.bin")):
        problem = f"{paths.MODEL}/ holds no weights (no *.safetensors)"
    for weights in sorted(checkpoint.rglob("*.safetensors")):  # the reference's, a critic's, ...
        problem = problem or _safetensors_problem(weights, checkpoint)
    if (checkpoint / paths.SHARDS).is_dir():
        problem = problem or _shards_problem(checkpoint)
    return problem or manifest_problem(checkpoint)


def model_problem(folder: Path, within: Path) -> str | None:
    """What makes the weights of the model (or adapters) in `folder` unloadable, naming the file relative
    to `within`; None when those it holds are whole."""
    name = folder.relative_to(within).as_posix()
    if not folder.is_dir():
        return f"{name}/ is missing"
    weights = sorted(folder.glob("*.safetensors"))
    for index in folder.glob("*.safetensors.index.json"):  # a model saved in parts
        listed = set(json.loads(index.read_text()).get("weight_map", {}).values())
        absent = sorted(part for part in listed if not (folder / part).is_file())
        if absent:
            return f"{name}/{absent[0]} is missing (listed in {index.name})"
    for path in weights:
        problem = _safetensors_problem(path, within)
        if problem:
            return problem
    return None


def newest_intact(run_dir: Path, problem: Problem = checkpoint_problem) -> tuple[Path | None, list[tuple[Path, str]]]:
    """(the newest checkpoint of `run_dir` without a `problem`, or None; the newer ones with theirs, newest first)."""
    broken: list[tuple[Path, str]] = []
    for checkpoint in reversed(paths.checkpoints(run_dir)):
        try:
            found = problem(checkpoint)
        except (OSError, ValueError) as e:  # unreadable, or an index that is not JSON
            found = f"a file cannot be read ({first_line(e)})"
        if found is None:
            return checkpoint, broken
        broken.append((checkpoint, found))
    return None, broken


def _safetensors_problem(path: Path, within: Path) -> str | None:
    from safetensors import SafetensorError, safe_open

    name, size = path.relative_to(within).as_posix(), path.stat().st_size
    end = _promised_size(path, size)
    if end is not None and size < end:
        return f"{name} is cut short ({size:,} of {end:,} bytes)"
    try:
        with safe_open(str(path), framework="pt") as f:  # the header, checked by the library that wrote it
            f.keys()
    except (SafetensorError, OSError) as e:
        return f"{name} is not a whole safetensors file ({first_line(e)})"
    return None


def _promised_size(path: Path, size: int) -> int | None:
    """The length a safetensors file's header gives it (8 bytes of header length, the JSON header, then the
    tensors' data up to the largest `data_offsets` end), or None when there is no sensible header to read."""
    with path.open("rb") as f:
        length = int.from_bytes(f.read(8), "little")
        if length > size:  # garbage, or cut inside the header: safe_open says which
            return None
        try:
            header = json.loads(f.read(length))
            ends = [int(t["data_offsets"][1]) for key, t in header.items() if key != "__metadata__"]
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            return None
    return 8 + length + max(ends, default=0)


def _torch_problem(path: Path, within: Path, key: str | None = None) -> str | None:
    import torch

    name = path.relative_to(within).as_posix()
    if not path.is_file():
        return f"{name} is missing"
    if not zipfile.is_zipfile(path):  # torch.save writes a zip, its index at the end: a cut one has none
        return f"{name} is not a file torch.save wrote (cut short or overwritten)"
    try:
        from rlvr import moved  # (a pickle may name modules by their paths of earlier versions)

        state = torch.load(path, mmap=True, weights_only=False, pickle_module=moved)  # (tensors mapped, not read)
    except Exception as e:  # whatever unpickling a damaged file raises, it is that file's problem
        return f"{name} does not load ({first_line(e)})"
    if key is not None and not (isinstance(state, dict) and key in state):
        return f"{name} holds no {key!r}"
    return None


def _shards_problem(checkpoint: Path) -> str | None:
    from torch.distributed.checkpoint.filesystem import FileSystemReader

    folder = checkpoint / paths.SHARDS
    try:
        metadata = FileSystemReader(str(folder)).read_metadata()
    except Exception as e:  # missing, cut short or garbage: the pickle's own error
        return f"{paths.SHARDS}/.metadata does not load ({first_line(e)})"
    ends: dict[str, int] = {}
    for item in (metadata.storage_data or {}).values():  # where each saved item lies: file, offset, length
        ends[item.relative_path] = max(ends.get(item.relative_path, 0), item.offset + item.length)
    for part, end in sorted(ends.items()):
        size = (folder / part).stat().st_size if (folder / part).is_file() else None
        if size is None or size < end:
            what = "is missing" if size is None else f"is cut short ({size:,} of {end:,} bytes)"
            return f"{paths.SHARDS}/{part} {what}"
    return None


HASHED_UP_TO = 64 * 2**20  # bytes: every file but a model's weights (which have the structural checks above)


def write_manifest(folder: Path) -> None:
    """manifest.json in `folder`: the size of every file in it, and the sha256 of those up to HASHED_UP_TO.
    Written last, when the checkpoint is whole."""
    files: dict[str, dict[str, object]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != paths.MANIFEST):
        size = path.stat().st_size
        files[path.relative_to(folder).as_posix()] = {"bytes": size, **(
            {"sha256": _sha256(path)} if size <= HASHED_UP_TO else {})}
    (folder / paths.MANIFEST).write_text(json.dumps({"files": files}, indent=1) + "\n")


def manifest_problem(checkpoint: Path) -> str | None:
    """The first file of `checkpoint`'s manifest that is missing, of another length or changed; None when all
    are as saved, or when there is no manifest (a checkpoint saved before rlvr wrote them)."""
    manifest = checkpoint / paths.MANIFEST
    if not manifest.is_file():
        return None
    for name, saved in json.loads(manifest.read_text())["files"].items():
        path = checkpoint / name
        if not path.is_file():
            return f"{name} is missing (listed in {paths.MANIFEST})"
        size = path.stat().st_size
        if size != saved["bytes"]:
            return f"{name} is {size:,} bytes, not the {saved['bytes']:,} it was saved with"
        if "sha256" in saved and _sha256(path) != saved["sha256"]:
            return (f"{name} is not the file saved with it (its contents changed since; to resume with other "
                    "settings, give them as --set KEY=VALUE)")
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()
