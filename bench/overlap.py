"""Decoding on a worker thread beside training in the same process (what `sampling.max_staleness` does with
rlvr's own engine): how much each slows the other, on a random network of SmolLM2-135M's shape.

    .venv/bin/python bench/overlap.py [--device cuda] [--prompts 16] [--group 4] [--tokens 64] [--train-tokens 128]
        [--layers 30] [--static]

Cases, each timed after a warm-up: decoding alone (main thread), training alone (forward, backward and an
AdamW step on a second copy, in a loop), then both at once (decoding on a thread while the main thread trains
until it ends), as is, with Python's GIL switch interval at 0.2 ms instead of 5 ms, and (on CUDA) with the
decoding on a CUDA stream of its own. Prints a table: decoding seconds, training steps/s, and each against
its time alone. On a GPU the bf16 autocast of rlvr's defaults is on.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent.parent / "src"))

from machine import machine_line

from rlvr.rollout import SamplingParams, generate

SMOLLM2 = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
               num_key_value_heads=3, head_dim=64, vocab_size=49152, tie_word_embeddings=True,
               max_position_embeddings=8192, rope_theta=100000.0)


def network(device: str, layers: int = SMOLLM2["num_hidden_layers"]) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**{**SMOLLM2, "num_hidden_layers": layers})).to(device)


def precision(device: str):
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.startswith("cuda") else contextlib.nullcontext()


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def decode(model, a, stream=None) -> float:
    """Seconds to sample a.prompts × a.group completions of a.tokens tokens each (no stop token)."""
    prompts = [[(7 * p + i) % 1000 + 10 for i in range(40)] for p in range(a.prompts)]
    started = time.perf_counter()
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext(), precision(a.device):
        generate(model, prompts, a.group, SamplingParams(a.tokens, temperature=1.0), stop_ids=[], pad_id=0,
                 seeds=list(range(a.prompts * a.group)), static=a.static)
    synchronize(a.device)
    return time.perf_counter() - started


def train_step(model, optimizer, a) -> None:
    ids = torch.randint(10, 1000, (a.prompts * a.group // 4, a.train_tokens), device=a.device)
    with precision(a.device):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    synchronize(a.device)


def train_alone(model, optimizer, a, steps: int = 8) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        train_step(model, optimizer, a)
    return steps / (time.perf_counter() - started)


def together(sampler, model, optimizer, a, stream=None) -> tuple[float, float]:
    """(decoding seconds, training steps/s) with both at once."""
    took: list[float] = []
    thread = threading.Thread(target=lambda: took.append(decode(sampler, a, stream)))
    started, steps = time.perf_counter(), 0
    thread.start()
    while thread.is_alive():
        train_step(model, optimizer, a)
        steps += 1
    thread.join()
    return took[0], steps / (time.perf_counter() - started)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--static", action="store_true",
                   help="decode over a static cache (rlvr.graphed): on CUDA, each step a CUDA graph replay")
    p.add_argument("--train-tokens", type=int, default=128)
    p.add_argument("--layers", type=int, default=SMOLLM2["num_hidden_layers"],
                   help="decoder layers (SmolLM2-135M's 30; fewer for a smoke run)")
    a = p.parse_args()
    sampler, model = network(a.device, a.layers).eval().requires_grad_(False), network(a.device, a.layers).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    decode(sampler, a), train_step(model, optimizer, a)  # warm-up
    alone_decode, alone_train = decode(sampler, a), train_alone(model, optimizer, a)
    rows = [("decoding alone", alone_decode, None), ("training alone", None, alone_train)]
    rows.append(("both, as is", *together(sampler, model, optimizer, a)))
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    rows.append(("both, GIL switch 0.2 ms", *together(sampler, model, optimizer, a)))
    sys.setswitchinterval(interval)
    if a.device.startswith("cuda"):
        rows.append(("both, decoding on its own CUDA stream",
                     *together(sampler, model, optimizer, a, torch.cuda.Stream())))
    name = torch.cuda.get_device_name() if a.device.startswith("cuda") else f"CPU, {torch.get_num_threads()} threads"
    print(f"{name}; {a.prompts}×{a.group} completions of {a.tokens} tokens; training batches of "
          f"{a.prompts * a.group // 4}×{a.train_tokens} tokens\n")
    cuda = a.device.startswith("cuda")
    print(machine_line("bfloat16 autocast, fp32 weights" if cuda else "float32", a.device))
    print("| case | decoding s | × alone | training steps/s | × alone |\n|---|---|---|---|---|")
    for case, seconds, rate in rows:
        d = f"{seconds:.2f} | {seconds / alone_decode:.2f}" if seconds is not None else "– | –"
        t = f"{rate:.2f} | {rate / alone_train:.2f}" if rate is not None else "– | –"
        print(f"| {case} | {d} | {t} |")


if __name__ == "__main__":
    main()
