"""Whether bf16 pays on this machine: fp32 against bf16 in the three kinds of work a GRPO step does on a CPU.

    .venv/bin/python bench/precision.py [--shape smollm2] [--repeats 3] [--new-tokens 64] [--threads 0]

- matmul: torch's product at an update's shape (2,048 token rows), a decoding step's (32 rows) and a decoding
  step's output layer, in GFLOP/s: what `model.dtype: auto` reads the CPU's flags for (rlvr.models.devices).
- forward + backward of 16 sequences of 160 tokens, fp32 against bf16 autocast (the update's work).
- decoding 4 prompts × 8 completions (rlvr.rollout.generate, every step to --new-tokens): in fp32 as rlvr decodes
  (the weights packed for oneDNN, rlvr.prepacked), under bf16 autocast with the layers' own forward (no
  packing), and under bf16 as rlvr decodes it (packed in bf16, the rest in fp32, where the CPU has bf16 units).

Each cell is the best of --repeats after one warm-up, on a random network of --shape (bench/generation.py's
shapes). The first line names the CPU; run it alone (another process on the cores moves every cell).
"""

from __future__ import annotations

import argparse
import contextlib
from unittest import mock

import torch
from generation import SHAPES, best_seconds, random_network  # (this folder)
from machine import machine_line

import rlvr.prepacked as prepacked
from rlvr.models.devices import cpu_bf16_units
from rlvr.rollout import SamplingParams, generate

BF16 = torch.bfloat16


def matmul_rate(rows: int, n_in: int, n_out: int, dtype: torch.dtype, repeats: int) -> float:
    """GFLOP/s of x [rows, n_in] · w [n_in, n_out] in `dtype`."""
    x, w = torch.randn(rows, n_in).to(dtype), torch.randn(n_in, n_out).to(dtype)
    reps = max(1, int(2e9 // (2 * rows * n_in * n_out)))  # (about 2 GFLOP a timing)
    seconds = best_seconds(lambda: [x @ w for _ in range(reps)], repeats)
    return 2 * rows * n_in * n_out * reps / seconds / 1e9


def forward_backward(model: torch.nn.Module, dtype: torch.dtype, tokens: torch.Tensor) -> None:
    with torch.autocast("cpu", dtype=BF16, enabled=dtype == BF16):
        logits = model(input_ids=tokens).logits
    logits.float().logsumexp(-1).mean().backward()
    model.zero_grad(set_to_none=True)


def decode(model: torch.nn.Module, ids: list[list[int]], new_tokens: int, dtype: torch.dtype, pack: bool) -> None:
    # (pack=False: the layers' own forward, no decoding being long enough to pack)
    unpacked = contextlib.nullcontext() if pack else mock.patch.object(prepacked, "MIN_STEPS", 10**9)
    with torch.no_grad(), torch.autocast("cpu", dtype=BF16, enabled=dtype == BF16), unpacked:
        generate(model, ids, 8, SamplingParams(max_new_tokens=new_tokens), stop_ids=[], pad_id=0,
                 seeds=list(range(8 * len(ids))))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="smollm2", help="a random network of this shape")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--sequences", type=int, default=16, help="forward + backward: this many sequences of 160 tokens")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: its default)")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    model, _ = random_network(a.shape)
    c = model.config
    print(machine_line(f"float32 against bfloat16; bf16 units: {cpu_bf16_units() or 'none'}"))
    rows: list[tuple[str, float, float, str]] = []
    for what, shape in [("matmul, update (2048 rows)", (2048, c.hidden_size, c.intermediate_size)),
                        ("matmul, decoding (32 rows)", (32, c.hidden_size, c.intermediate_size)),
                        ("matmul, output layer (32 rows)", (32, c.hidden_size, c.vocab_size))]:
        fp32, bf16 = (matmul_rate(*shape, dtype, a.repeats) for dtype in (torch.float32, BF16))
        rows.append((what, fp32, bf16, "GFLOP/s"))
    tokens = torch.randint(0, c.vocab_size, (a.sequences, 160))
    model.train()
    fp32, bf16 = (best_seconds(lambda d=dtype: forward_backward(model, d, tokens), a.repeats)
                  for dtype in (torch.float32, BF16))
    rows.append((f"forward + backward, {a.sequences} × 160 tokens", fp32, bf16, "s"))
    model.eval()
    ids = [[1 + (7 * i + j) % (c.vocab_size - 1) for j in range(40)] for i in range(4)]
    fp32 = best_seconds(lambda: decode(model, ids, a.new_tokens, torch.float32, pack=True), a.repeats)
    autocast = best_seconds(lambda: decode(model, ids, a.new_tokens, BF16, pack=False), a.repeats)
    with torch.autocast("cpu", dtype=BF16):
        packs = prepacked.packs(model, a.new_tokens) == BF16
    rlvr = best_seconds(lambda: decode(model, ids, a.new_tokens, BF16, pack=True), a.repeats)
    rows.append((f"decoding 32 × {a.new_tokens} tokens, bf16 autocast, layers' own forward", fp32, autocast, "s"))
    rows.append((f"decoding 32 × {a.new_tokens} tokens, bf16 as rlvr decodes ({'packed' if packs else 'autocast'})",
                 fp32, rlvr, "s"))
    print(f"{'work':<72} {'fp32':>9} {'bf16':>9} unit     bf16 faster by")
    for what, x, y, unit in rows:
        speedup = y / x if unit == "GFLOP/s" else x / y
        print(f"{what:<72} {x:>9.2f} {y:>9.2f} {unit:<8} {speedup:.2f}×")


if __name__ == "__main__":
    main()
