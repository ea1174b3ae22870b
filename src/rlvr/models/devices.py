"""Where a run computes and in what precision: the GPU path.

Weights, gradients and optimizer state stay fp32; with `model.dtype: bfloat16` the forward passes
(rollout, reference, update) run under `torch.autocast`, and the frozen reference is stored in
bf16. `auto` picks CUDA when there is one and bf16 on a GPU that supports it.
"""

from __future__ import annotations

import re
import resource
import sys
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from rlvr.config import BAD_DEVICE, DEVICE_PATTERN
from rlvr.errors import UserError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_device(name: str) -> torch.device:
    """`auto` -> cuda when available, else cpu; `cpu`, `cuda`, `cuda:N` as given, checked.

    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if re.fullmatch(DEVICE_PATTERN, name) is None:
        raise UserError(BAD_DEVICE.format(name))
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"model.device={name} but torch sees no CUDA GPU here: use model.device=auto or cpu "
                            "(or install a CUDA build of torch)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise UserError(f"model.device={name} but only {torch.cuda.device_count()} CUDA device(s) exist")
    return device


def compute_dtype(name: str, device: torch.device) -> torch.dtype:
    """The forward passes' precision: `auto` is bf16 on a GPU that supports it, fp32 elsewhere.

    >>> compute_dtype("auto", torch.device("cpu"))
    torch.float32
    """
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    return DTYPES[name]


def autocast(device: torch.device, dtype: torch.dtype) -> AbstractContextManager[Any]:
    """torch.autocast for reduced precision; nothing for fp32."""
    if dtype == torch.float32:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def peak_memory_gb(device: torch.device) -> float:
    """Peak allocated GPU memory on CUDA; peak resident set size of the process on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 1e9
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e9 if sys.platform == "darwin" else peak / 1e6  # bytes on macOS, KiB on Linux
