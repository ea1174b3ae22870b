"""Models: loading the policy and its tokenizer (`tiny`, `smollm2`, a .gguf file, a checkpoint or run
directory, a hub id), where and in what precision they compute, and reward models (a one-output head).

    loading.py       load_model, build_tiny_model, resolve_model_path, frozen_copy
    adapters.py      LoRA through peft: trainable adapters, the base as the reference, adapter folders
    export.py        `rlvr export`: a run's model, its adapters, or both merged, for other tools
    files.py         model folders whose files are all readable alike (safetensors writes 0600)
    devices.py       model.device / model.dtype: the GPU path, autocast, peak memory
    reward_model.py  a Bradley–Terry scorer: load, tokenise, score texts
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlvr.models.loading import (
        adapt,
        build_tiny_model,
        build_tiny_tokenizer,
        convert_gguf,
        find_model_dir,
        frozen_copy,
        load_configured,
        load_model,
        load_pretrained,
        resolve_model_path,
        set_checkpointing,
    )

__all__ = [
    "adapt",
    "build_tiny_model",
    "build_tiny_tokenizer",
    "convert_gguf",
    "find_model_dir",
    "frozen_copy",
    "load_configured",
    "load_model",
    "load_pretrained",
    "resolve_model_path",
    "set_checkpointing",
]


def __getattr__(name: str) -> object:
    """The loading functions, imported on first use (PEP 562): loading imports transformers, a few seconds that
    `rlvr.models.devices` and the other light modules of this package should not pay."""
    if name in __all__:
        from rlvr.models import loading

        return getattr(loading, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
