"""Decoding on a CPU with the linear layers' weights packed once for oneDNN.

A decoding step multiplies a few rows (the completions still going) by every weight matrix. At these shapes
torch's fp32 CPU matmul (MKL's sgemm) runs far below its rate on large products: on 2 AMD EPYC cores a 32-row
product with SmolLM2's 576×1536 weight ran at 79 GFLOP/s where a 1024-row one runs at 162, and 8 rows at 39
(MKL's own packed-weight sgemm was no faster). oneDNN's linear, given each weight reordered once into its own
blocked layout (what torch.compile's CPU weight freezing does), ran those 1.3-1.9× faster and the output layer
(49,152 × 576) 1.8-3.3× faster; a whole decoding of the benchmark job's shape (SmolLM2-135M-Instruct, 4 prompts
× 8 completions, ≤ 128 tokens) took 11-27% less time per token over three interleaved rounds (2026-11-30).

The packed copy is made for one decoding (an optimizer step changes the weights in place between two) and
dropped after it: one more copy of the linear weights while decoding (rlvr.rl.memory counts it). Only where it
pays: fp32 weights on a CPU with oneDNN, no autocast (bf16 decoding keeps autocast's casts), and a decoding of
at least MIN_STEPS steps (packing SmolLM2 took 0.3 s, what about ten of its decoding steps save). oneDNN's sums
round differently from MKL's (about 1e-6 relative, as any two kernels' do), and the trainer's forward is still
MKL's: the sampler/trainer log-prob gap (`sampler/logp_abs_diff_{mean,max}`) on the benchmark job went from
about 1e-6 / 1e-5 nats to 1.6-1.8e-5 / 6-8e-5, still far below what the clipped ratio or the rollout correction
acts on (with one update per batch the old log-probs are the trainer's own, and the gap enters no loss).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

MIN_STEPS = 16


def packs(model: torch.nn.Module, steps: int) -> bool:
    """Whether decoding `steps` steps with `model` here packs its linear layers (see the module docstring)."""
    weight = next(model.parameters(), None)
    return (weight is not None and not torch.is_autocast_enabled("cpu")
            and pays(weight.device, weight.dtype, steps))


def pays(device: torch.device, dtype: torch.dtype, steps: int) -> bool:
    """Whether decoding `steps` steps on `device` with forward passes in `dtype` packs (rlvr.rl.memory plans it)."""
    return steps >= MIN_STEPS and device.type == "cpu" and dtype == torch.float32 and onednn_linear()


def onednn_linear() -> bool:
    """Whether this torch has oneDNN and its packed linear (the operators torch.compile's CPU freezing uses)."""
    ops = torch.ops.mkldnn
    return bool(torch.backends.mkldnn.is_available()) and all(  # type: ignore[no-untyped-call]
        hasattr(ops, name) for name in ("_reorder_linear_weight", "_linear_pointwise"))


@contextmanager
def packed_linears(model: torch.nn.Module, steps: int) -> Iterator[bool]:
    """Within it, every `torch.nn.Linear` of `model` computes with its weight packed for oneDNN, where `packs`
    says it pays (yields whether it does); each layer's own forward is back after it, error or not."""
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear and "forward" not in m.__dict__
               and m.weight.dtype == torch.float32] if packs(model, steps) else []
    try:
        for m in linears:
            m.__dict__["forward"] = packed_forward(m.weight, m.bias)  # (over the class's forward)
        yield bool(linears)
    finally:
        for m in linears:
            m.__dict__.pop("forward", None)


def packed_forward(weight: torch.Tensor, bias: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """x [..., in] -> x·weightᵀ + bias [..., out], by oneDNN on `weight` packed now (no gradient flows)."""
    packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach())
    kept = None if bias is None else bias.detach()

    def forward(x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, x.shape[-1]), packed, kept, "none", [], "")
        return y.reshape(*x.shape[:-1], y.shape[-1])  # type: ignore[no-any-return]

    return forward
