"""What a model name stands for, told apart cheaply: a run folder gives its newest checkpoint, which moves as
the run trains, so a result recorded for `runs/x` (an evaluation resumed later) names the weights too."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rlvr.models.loading import resolve_model_path

MIB = 1 << 20


def model_identity(name: str, cache_dir: str) -> str | None:
    """A fingerprint of the weights `name` loads (`folder_fingerprint` of the folder it resolves to: a run
    folder's newest whole checkpoint, a checkpoint, a model folder, a converted GGUF); None for a name
    that is no folder here (a hub id, the tiny test model), whose weights do not move under it."""
    resolved = Path(resolve_model_path(name, cache_dir))
    return folder_fingerprint(resolved) if resolved.is_dir() else None


def folder_fingerprint(folder: Path) -> str:
    """Each file's path and size, and its first, middle and last MiB: two checkpoints of a run differ in
    every weight, so they differ here, read in milliseconds whatever the model's size.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "w.bin").write_bytes(bytes(3 * MIB))
    ...     before = folder_fingerprint(Path(d))
    ...     with (Path(d) / "w.bin").open("r+b") as f:
    ...         _ = f.seek(MIB + MIB // 2)
    ...         _ = f.write(b"1")
    ...     before != folder_fingerprint(Path(d))
    True
    """
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder)}\0{size}\0".encode())
        with path.open("rb") as f:
            for offset in sorted({0, max(0, size // 2 - MIB // 2), max(0, size - MIB)}):
                f.seek(offset)
                digest.update(f.read(MIB))
    return digest.hexdigest()[:16]

