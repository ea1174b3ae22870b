"""Rollouts of a LoRA policy three ways: adapters apart (peft's forward: base matmul plus B A x at every
layer), merged into the weights for sampling and unmerged for the update (peft's merge_adapter /
unmerge_adapter around each rollout), and folded into copies of the weights (what rlvr does,
rlvr.models.adapters.folded_for_decoding: W + BA in new tensors, the base tensors put back untouched).

    .venv/bin/python bench/lora_sampling.py [--model smollm2] [--prompts 8] [--group-size 8] [--new-tokens 128]
        [--temperature 1.0] [--rank 16] [--repeats 3]

All sample the same prompts with the same seed from the default job's LoRA policy (adapters made
non-zero first, as after training). Prints the median seconds per rollout of each way (merging and
folding included), and what each leaves in the base weights: W + BA − BA is not W in floating point, so
merging for every rollout makes the "frozen" base drift step after step. Last, the seconds of one
decoding step with the adapters apart and folded, which is what folding saves per decoded token.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch
from machine import job_precision, machine_line

from rlvr.config import load_config
from rlvr.grpo.trainer import Trainer
from rlvr.run import policy as policy_module
from rlvr.run.process import configure_process


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    config = load_config(None, [f"model.name={args.model}", f"model.lora.rank={args.rank}", "model.device=cpu",
                                f"sampling.group_size={args.group_size}",
                                f"sampling.batch_size={args.prompts * args.group_size}",
                                f"generation.max_new_tokens={args.new_tokens}",
                                f"generation.temperature={args.temperature}", "output_dir=/tmp/rlvr-lora-bench"])
    configure_process(config.threads, config.seed)  # as `rlvr train` sets the process up (threads, seed, heap)
    trainer = Trainer(config)
    policy = trainer.policy.model  # the peft model (rlvr.run.policy.Policy holds it)
    with torch.no_grad():  # adapters as after some training: B no longer zero
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.01)
    positions = list(range(args.prompts))
    base = {n: w.detach().clone() for n, w in policy.named_parameters() if not w.requires_grad}

    folding = policy_module.folded_for_decoding  # what Policy.decoding folds the adapters with

    @contextlib.contextmanager
    def as_it_is(model):
        yield model

    def apart() -> int:
        policy_module.folded_for_decoding = as_it_is
        try:
            return int(trainer.source.sample(positions, 0, trainer.source.synced()).lengths.sum())
        finally:
            policy_module.folded_for_decoding = folding

    def merged() -> int:
        policy_module.folded_for_decoding = as_it_is
        policy.merge_adapter()
        try:
            return int(trainer.source.sample(positions, 0, trainer.source.synced()).lengths.sum())
        finally:
            policy.unmerge_adapter()
            policy_module.folded_for_decoding = folding

    def folded() -> int:
        return int(trainer.source.sample(positions, 0, trainer.source.synced()).lengths.sum())

    rows, drift = [], {}
    for name, fn in (("adapters apart", apart), ("peft merge + unmerge", merged), ("folded copies (rlvr)", folded)):
        fn()  # warm-up
        seconds, tokens = [], 0
        for _ in range(args.repeats):
            start = time.perf_counter()
            tokens = fn()
            seconds.append(time.perf_counter() - start)
        rows.append((name, statistics.median(seconds), tokens))
        drift[name] = max(float((w - base[n]).abs().max()) for n, w in policy.named_parameters() if not w.requires_grad)
        with torch.no_grad():
            for n, w in policy.named_parameters():
                if not w.requires_grad:
                    w.copy_(base[n])
    print(f"\n{args.model}, LoRA r={args.rank} all-linear, {args.prompts} prompts × {args.group_size}, "
          f"≤{args.new_tokens} tokens, {torch.get_num_threads()} threads, median of {args.repeats}\n")
    print(machine_line(job_precision([])))  # (model.device=cpu, model.dtype as the default job's)
    print(f"| rollout | s/rollout | completion tok/s | vs apart | base weights after {args.repeats + 1} rollouts |")
    print("|---|---|---|---|---|")
    for name, s, tokens in rows:
        print(f"| {name} | {s:.2f} | {tokens / s:.1f} | {rows[0][1] / s:.2f}× | max abs change {drift[name]:.1e} |")
    step_apart = decode_step_seconds(policy.eval(), args.prompts * args.group_size)
    with folding(policy) as model:
        step_folded = decode_step_seconds(model, args.prompts * args.group_size)
    print(f"\none decoding step ({args.prompts * args.group_size} rows, 100 cached tokens, mean of 40): adapters apart "
          f"{1000 * step_apart:.0f} ms, folded {1000 * step_folded:.0f} ms")


@torch.no_grad()
def decode_step_seconds(model, rows: int, cached: int = 100, steps: int = 40) -> float:
    """Seconds of one decoding step of `rows` rows over `cached` cached tokens (random ids): what a rollout
    repeats once per token, without the fold's one-off cost."""
    from transformers import DynamicCache

    ids = torch.randint(0, min(1000, model.config.vocab_size), (rows, cached))  # (the tiny model's vocabulary: fewer)
    cache = model(input_ids=ids, past_key_values=DynamicCache(), use_cache=True, logits_to_keep=1).past_key_values
    start = time.perf_counter()
    for _ in range(steps):
        cache = model(input_ids=ids[:, -1:], past_key_values=cache, use_cache=True, logits_to_keep=1).past_key_values
    return (time.perf_counter() - start) / steps


if __name__ == "__main__":
    main()
