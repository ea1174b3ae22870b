"""Where a run computes and in what precision.

Weights, gradients and optimizer state stay fp32; with `model.dtype: bfloat16` the forward passes
(rollout, reference, update) run under `torch.autocast`, and the frozen reference is stored in
bf16. `auto` picks CUDA when there is one, and bf16 where the hardware makes it faster: a GPU that
supports it, or a CPU with bf16 arithmetic: AMX matrix units (Intel Xeon since Sapphire Rapids), where bf16
matmuls ran 3-4x faster than fp32 on 2 cores, or AVX512-BF16 (AMD EPYC since Zen 4, Intel Cooper Lake),
2.1-3.6x (docs/performance.md). A CPU without either (AMD EPYC before Zen 4, most laptops) computes bf16 far
slower than fp32 (about 1 GFLOP/s against 50-175 on a 2-core AMD EPYC), so `auto` stays fp32 there.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import re
import resource
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar

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
    """The forward passes' precision: `auto` is bf16 on a GPU that supports it and on a CPU with bf16 units
    (AMX or AVX512-BF16), fp32 elsewhere (`precision` says why).

    >>> compute_dtype("float32", torch.device("cpu")), compute_dtype("bfloat16", torch.device("cpu"))
    (torch.float32, torch.bfloat16)
    """
    return precision(name, device)[0]


def precision(name: str, device: torch.device) -> tuple[torch.dtype, str]:
    """(the forward passes' dtype, why, in words) for `model.dtype` = `name` on `device`: the line a run says
    at its start and records in summary.json.

    >>> precision("float32", torch.device("cpu"))[1]
    'float32 (model.dtype=float32)'
    """
    if name != "auto":
        dtype = DTYPES[name]
        slow = (dtype == torch.bfloat16 and device.type == "cpu" and cpu_bf16_units() is None)
        warning = f"; this CPU, {cpu_name()}, has no bf16 matrix units: expect it slower than float32" if slow else ""
        return dtype, f"{DTYPE_NAMES[dtype]} (model.dtype={name}{warning})"
    if device.type == "cuda":
        bf16 = torch.cuda.is_bf16_supported()
        card = torch.cuda.get_device_name(device)
        return ((torch.bfloat16, f"bfloat16 autocast, fp32 weights (model.dtype=auto: {card} supports bf16)")
                if bf16 else (torch.float32, f"float32 (model.dtype=auto: {card} has no bf16)"))
    units, cpu = cpu_bf16_units(), cpu_name()
    if units:
        has = "AMX bf16 matrix units" if units == "amx" else "AVX512-BF16 bf16 arithmetic"
        return torch.bfloat16, (f"bfloat16 autocast, fp32 weights (model.dtype=auto: this CPU, {cpu}, has {has}; "
                                "model.dtype=float32 for fp32)")
    return torch.float32, (f"float32 (model.dtype=auto: this CPU, {cpu}, has no bf16 matrix units, where bf16 runs "
                           "slower than fp32)")


DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
C = TypeVar("C")


def resolved_precision(config: C) -> tuple[C, str]:
    """A run's `config` with model.dtype `auto` resolved for this machine, so that its config.yaml records the
    precision it trains in and a resumed run keeps it; and the words saying which and why (`precision`), which
    the run prints once it is sure to train and keeps in summary.json. The config given is left as it is."""
    model: Any = config.model  # type: ignore[attr-defined]
    dtype, said = precision(model.dtype, resolve_device(model.device))
    resolved = dataclasses.replace(model, dtype=DTYPE_NAMES[dtype])
    return dataclasses.replace(config, model=resolved), said  # type: ignore[type-var]


BF16_UNITS_ENV = "RLVR_CPU_BF16_UNITS"  # amx, avx512_bf16 or none: decide `auto` as on such a CPU (the tests: none)
BF16_UNITS = ("amx", "avx512_bf16")


def cpu_bf16_units() -> str | None:
    """The CPU's bf16 matrix arithmetic that torch can use: `amx` (AMX tiles), `avx512_bf16`, or None.
    torch's own CPU feature checks (what its compiler reads); None where this torch has none. $RLVR_CPU_BF16_UNITS
    (amx, avx512_bf16 or none) says it instead: the test suite sets none, so that its numbers are fp32's on every
    CPU, and fakes the others where it tests the choice."""
    told = os.environ.get(BF16_UNITS_ENV)
    if told is not None:
        if told not in (*BF16_UNITS, "none"):
            raise UserError(f"{BF16_UNITS_ENV}={told!r} must be amx, avx512_bf16 or none (or unset: this CPU's own)")
        return None if told == "none" else told
    cpu = torch.cpu
    if getattr(cpu, "_is_amx_tile_supported", lambda: False)():
        return "amx"
    if getattr(cpu, "_is_avx512_bf16_supported", lambda: False)():
        return "avx512_bf16"
    return None


def machine_name(device: str) -> str:
    """What computes a run on `device` (a model.device setting), in words: the GPU's name, else the CPU's with its
    core count (rlvr records it beside the precision; every benchmark table names it).

    >>> "cores" in machine_name("cpu")
    True
    """
    resolved = resolve_device(device)
    if resolved.type == "cuda":
        return torch.cuda.get_device_name(resolved)
    return f"{cpu_name()}, {os.cpu_count()} cores"


@functools.cache
def cpu_name() -> str:
    """The CPU's model name ("AMD EPYC 9B14", "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"), for the
    precision line and every benchmark table; `platform.processor()` where /proc/cpuinfo is absent."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "an unknown CPU"


def autocast(device: torch.device, dtype: torch.dtype) -> AbstractContextManager[Any]:
    """torch.autocast for reduced precision; nothing for fp32."""
    if dtype == torch.float32:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


@contextmanager
def frozen_cast_once(model: torch.nn.Module, dtype: torch.dtype) -> Iterator[None]:
    """Within: the frozen linear weights of `model` (a LoRA model's base layers) held cast to `dtype`, for one
    forward with gradients under `dtype` autocast; nothing changes in fp32 or without gradients.

    Autocast casts a weight that needs no gradient anew at every call (its cache keeps the casts of trainable
    weights only), and each cast is kept for the backward pass. rlvr.logprobs calls the layers once for the
    prompts and once for each length bucket of completions, so a LoRA update kept that many bf16 copies of the
    frozen weights (Qwen2.5-0.5B: 0.7 GB each); cast here once, they are kept once. The same cast (`Tensor.to`),
    so the same numbers. The output layer is left as it is: rlvr.logprobs' backward reads its fp32 weight."""
    if dtype == torch.float32 or not torch.is_grad_enabled():
        yield
        return
    output = getattr(model, "get_output_embeddings", lambda: None)()
    held = [(m, m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not output
            and not m.weight.requires_grad and m.weight.dtype == torch.float32]
    for module, weight in held:
        module.weight = torch.nn.Parameter(weight.to(dtype), requires_grad=False)
    try:
        yield
    finally:
        for module, weight in held:
            module.weight = weight


def peak_memory_gb(device: torch.device) -> float:
    """Peak allocated GPU memory on CUDA; on a CPU, the peak resident set of this process since it started, in GB
    (10^9 bytes). On Linux that is VmHWM: getrusage's ru_maxrss starts from the size of the process that spawned
    this one (a test runner, a notebook), which it keeps across exec."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 1e9
    try:
        status = Path("/proc/self/status").read_text().splitlines()
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:")) / 1e9
    except (OSError, StopIteration, ValueError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 1e9 if sys.platform == "darwin" else peak * 1024 / 1e9  # bytes on macOS, KiB on Linux
