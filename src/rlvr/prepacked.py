"""Decoding on a CPU with the linear layers' weights packed once for oneDNN.

A decoding step multiplies a few rows (the completions still going) by every weight matrix. At these shapes
torch's fp32 CPU matmul (MKL's sgemm) runs far below its rate on large products: on 2 AMD EPYC cores a 32-row
product with SmolLM2's 576×1536 weight ran at 79 GFLOP/s where a 1024-row one runs at 162, and 8 rows at 39
(MKL's own packed-weight sgemm was no faster). oneDNN's linear, given each weight reordered once into its own
blocked layout (what torch.compile's CPU weight freezing does), ran those 1.3-1.9× faster and the output layer
(49,152 × 576) 1.8-3.3× faster; a whole decoding of the benchmark job's shape (SmolLM2-135M-Instruct, 4 prompts
× 8 completions, ≤ 128 tokens) took 11-27% less time per token over three interleaved rounds (2026-11-30).

Under bf16 (`model.dtype` bfloat16 on a CPU with bf16 units, rlvr.models.devices.cpu_bf16_units) the copy is
the weights cast to bf16 once, packed the same way, where autocast would cast every weight at every step; and
autocast is off while decoding, so that the rest of the step (the norms, attention over the KV cache, the
sampling) runs in fp32: torch's CPU attention over the cache ran 2.7x slower in bf16 than in fp32 (a one-off
torch.profiler run over SmolLM2's decoding). The linear layers' inputs are rounded to bf16 as autocast rounds them
and their outputs come back in fp32. On 2 AMD EPYC cores with AVX512-BF16, decoding 32 completions of 64 tokens
took 5.4 s this way, 6.5 s packed in fp32 and 8.7 s under autocast (SmolLM2's shape; Qwen2.5-0.5B's: 9.7, 16.5
and 15.8 s; bench/precision.py, 2026-12-01). The prompts' pass before decoding keeps autocast
(its bf16 keys and values join the cache in fp32 at the first step).

The packed copy is made for one decoding (an optimizer step changes the weights in place between two) and
dropped after it: one more copy of the linear weights while decoding (rlvr.rl.memory counts it). A LoRA policy's
weights folded for decoding (rlvr.models.adapters.folded_for_decoding) are set aside as each is packed, so that
the two copies do not add up, and folded again after. Only where it
pays: fp32 weights on a CPU with oneDNN, computed in fp32 or (with bf16 units) under bf16 autocast, and a
decoding of at least MIN_STEPS steps (packing SmolLM2 took 0.3 s, what about ten of its decoding steps save).
oneDNN's sums round differently from MKL's (about 1e-6 relative, as any two kernels' do), and the trainer's
forward is still MKL's: the sampler/trainer log-prob gap (`sampler/logp_abs_diff_{mean,max}`) on the benchmark
job went from about 1e-6 / 1e-5 nats to 1.6-1.8e-5 / 6-8e-5 in fp32, still far below what the clipped ratio or
the rollout correction acts on (with one update per batch the old log-probs are the trainer's own, and the gap
enters no loss).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import torch

from rlvr.models.adapters import give_back_freed_memory, set_fold_aside
from rlvr.models.devices import cpu_bf16_units

MIN_STEPS = 16


def packs(model: torch.nn.Module, steps: int) -> torch.dtype | None:
    """The dtype decoding `steps` steps with `model` here multiplies its packed linear layers in, or None where
    it does not pack (see the module docstring)."""
    weight = next(model.parameters(), None)
    if weight is None or weight.dtype != torch.float32:
        return None
    dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else weight.dtype
    return dtype if pays(weight.device, dtype, steps) else None


def pays(device: torch.device, dtype: torch.dtype, steps: int) -> bool:
    """Whether decoding `steps` steps on `device` with forward passes in `dtype` packs (rlvr.rl.memory plans it)."""
    if steps < MIN_STEPS or device.type != "cpu" or not onednn_linear():
        return False
    return dtype == torch.float32 or (dtype == torch.bfloat16 and cpu_bf16_units() is not None
                                      and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()))


def onednn_linear() -> bool:
    """Whether this torch has oneDNN and its packed linear (the operators torch.compile's CPU freezing uses)."""
    ops = torch.ops.mkldnn
    return bool(torch.backends.mkldnn.is_available()) and all(  # type: ignore[no-untyped-call]
        hasattr(ops, name) for name in ("_reorder_linear_weight", "_linear_pointwise"))


@contextmanager
def packed_linears(model: torch.nn.Module, steps: int) -> Iterator[bool]:
    """Within it, every `torch.nn.Linear` of `model` computes with its weight packed for oneDNN, where `packs`
    says it pays (yields whether it does), under bf16 with autocast off; each layer's own forward (and autocast)
    is back after it, error or not."""
    dtype = packs(model, steps)
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear and "forward" not in m.__dict__
               and m.weight.dtype in (torch.float32, dtype)] if dtype else []  # (a LoRA fold: autocast's dtype)
    with ExitStack() as outside:
        if dtype == torch.bfloat16:
            outside.enter_context(torch.autocast("cpu", enabled=False))
        folds_again = []  # a LoRA policy's folded weights, set aside once packed (rlvr.models.adapters)
        try:
            for m in linears:
                m.__dict__["forward"] = packed_forward(m.weight, m.bias, dtype)  # (over the class's forward)
                fold_again = set_fold_aside(m.weight)
                if fold_again is not None:
                    folds_again.append(fold_again)
            yield bool(linears)
        finally:
            for m in linears:
                m.__dict__.pop("forward", None)
            if folds_again:  # once the packed copies are freed and given back: else the folds add to them
                give_back_freed_memory()
                for fold_again in folds_again:
                    fold_again()


def packed_forward(weight: torch.Tensor, bias: torch.Tensor | None,
                   dtype: torch.dtype | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """x [..., in] -> x·weightᵀ + bias [..., out] in x's dtype, by oneDNN on `weight` cast to `dtype` (its own:
    None) and packed now, the input rounded to `dtype` (no gradient flows)."""
    dtype = dtype or weight.dtype
    packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().to(dtype))
    kept = None if bias is None else bias.detach().to(dtype)

    def forward(x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, x.shape[-1]).to(dtype), packed, kept, "none", [], "")
        return y.reshape(*x.shape[:-1], y.shape[-1]).to(x.dtype)  # type: ignore[no-any-return]

    return forward
