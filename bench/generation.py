"""Generation speed: rlvr's rollout engine against HF `generate`, same model, prompts and length.

    .venv/bin/python bench/generation.py [--model smollm2] [--batches 1,8,32] [--new-tokens 128] [--threads 0]
                                         [--device cuda] [--hf-compile] [--shape qwen2.5-0.5b] [--dtype bfloat16]

Both decode greedily for exactly --new-tokens tokens (stop tokens ignored, so both produce the same
number of tokens), from the same left-padded chat prompts (one-digit sums). Each cell is the best of
--repeats runs after one warm-up. A last row per batch size shows rlvr's grouped mode: batch/8
prompts × 8 completions each, the prompt prefilled once per group (what GRPO does).
A "rlvr static" row decodes over a static KV cache (rlvr.graphed): on CUDA each step is a CUDA graph replay
(generation.cuda_graphs), on a CPU the same step eagerly. With --hf-compile (CUDA), HF generate with its static
cache and `torch.compile(mode="reduce-overhead")` is measured too, its compilation in the warm-up.
--shape builds a random network of that model's shape instead of loading --model (a lent GPU machine cannot
receive the weights: 64 MiB), with the tiny model's tokenizer; --dtype casts the network.
Prints a table with tokens per second and the rlvr/HF ratio; also checks that the greedy tokens agree.
"""

from __future__ import annotations

import argparse
import time

import torch
from machine import machine_line
from overlap import SMOLLM2  # (this folder: the random network's shape, as that bench builds it)

from rlvr.data import load_examples, render_prompt
from rlvr.models import load_model
from rlvr.rollout import SamplingParams, generate

SHAPES = {  # (transformers class name, config) of random networks with these models' shapes
    "smollm2": ("Llama", SMOLLM2),  # (bench/overlap.py's)
    "qwen2.5-0.5b": ("Qwen2", dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                                   num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                                   tie_word_embeddings=True, max_position_embeddings=32768)),
    "tiny": ("Qwen2", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=128, tie_word_embeddings=True)),  # (smoke tests)
}


def random_network(shape: str):
    """A random network of `shape` (SHAPES) and the tiny model's tokenizer (its ids fit any vocabulary)."""
    import transformers

    from rlvr.models import build_tiny_model

    family, config = SHAPES[shape]
    torch.manual_seed(0)
    model = getattr(transformers, f"{family}ForCausalLM")(getattr(transformers, f"{family}Config")(**config))
    model.generation_config.eos_token_id = None  # (a random network has no end token of its own)
    return model, build_tiny_model(seed=0)[1]


def prompts(tokenizer, n: int) -> list[list[int]]:
    rows = load_examples("arithmetic", limit=n, difficulty=2)
    texts = [render_prompt(r.prompt, template="chat", tokenizer=tokenizer) for r in rows]
    return [tokenizer(t, add_special_tokens=False).input_ids for t in texts]


def hf_generate(model, tokenizer, ids: list[list[int]], new_tokens: int) -> torch.Tensor:
    tokenizer.padding_side = "left"
    batch = tokenizer.pad({"input_ids": ids}, return_tensors="pt").to(model.device)
    out = model.generate(**batch, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                         pad_token_id=tokenizer.pad_token_id)
    return out[:, batch["input_ids"].shape[1]:].cpu()


def hf_compiled(model, tokenizer, ids: list[list[int]], new_tokens: int) -> torch.Tensor:
    """HF generate with its static cache, whose decoding forward transformers compiles itself on a GPU
    (torch.compile, mode reduce-overhead: CUDA graphs)."""
    tokenizer.padding_side = "left"
    batch = tokenizer.pad({"input_ids": ids}, return_tensors="pt").to(model.device)
    out = model.generate(**batch, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                         pad_token_id=tokenizer.pad_token_id, cache_implementation="static")
    return out[:, batch["input_ids"].shape[1]:].cpu()


def rlvr_generate(model, tokenizer, ids: list[list[int]], new_tokens: int, group_size: int = 1,
                  static: bool = False) -> torch.Tensor:
    out = generate(model, ids, group_size, SamplingParams(new_tokens, temperature=0.0), stop_ids=[],
                   pad_id=tokenizer.pad_token_id, static=static)
    return out.completion_ids


def greedy_agrees(model, tokenizer, ids: list[list[int]], new_tokens: int = 24) -> bool:
    """Whether both engines give the same greedy completions, each up to its stop token (checked
    without the forced length, which changes greedy choices where a completion would end)."""
    eos = tokenizer.eos_token_id
    tokenizer.padding_side = "left"
    batch = tokenizer.pad({"input_ids": ids}, return_tensors="pt")
    hf = model.generate(**batch.to(model.device), max_new_tokens=new_tokens, do_sample=False, eos_token_id=eos,
                        pad_token_id=tokenizer.pad_token_id).cpu()
    ours = generate(model, ids, 1, SamplingParams(new_tokens, temperature=0.0), stop_ids=[eos],
                    pad_id=tokenizer.pad_token_id)
    for row in range(len(ids)):
        theirs = hf[row, batch["input_ids"].shape[1]:].tolist()
        theirs = theirs[: theirs.index(eos) + 1] if eos in theirs else theirs
        if ours.completion_ids[row][ours.completion_mask[row]].tolist() != theirs:
            return False
    return True


def best_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--hf-compile", action="store_true", help="also HF generate with its compiled static cache")
    parser.add_argument("--shape", choices=sorted(SHAPES), help="a random network of this shape, not --model")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = random_network(args.shape) if args.shape else load_model(args.model)
    model.eval().to(args.device, getattr(torch, args.dtype))
    args.model = args.shape or args.model
    card = torch.cuda.get_device_name() if args.device == "cuda" else f"{torch.get_num_threads()} CPU threads"
    print(f"model {args.model}, {args.new_tokens} new tokens, greedy, {card}, torch {torch.__version__}")
    print(machine_line(f"{args.dtype} (--dtype)", args.device))
    print(f"{'batch':>5}  {'engine':<22} {'seconds':>8} {'tokens/s':>9} {'vs HF':>6}")
    with torch.no_grad():
        for b in [int(x) for x in args.batches.split(",")]:
            ids = prompts(tokenizer, b)
            same = greedy_agrees(model, tokenizer, ids)
            hf = best_seconds(lambda ids=ids: hf_generate(model, tokenizer, ids, args.new_tokens), args.repeats)
            ours = best_seconds(lambda ids=ids: rlvr_generate(model, tokenizer, ids, args.new_tokens), args.repeats)
            tokens = b * args.new_tokens
            print(f"{b:>5}  {'HF generate':<22} {hf:8.2f} {tokens / hf:9.1f} {1.0:6.2f}")
            print(f"{b:>5}  {'rlvr':<22} {ours:8.2f} {tokens / ours:9.1f} {hf / ours:6.2f}   "
                  f"greedy tokens equal: {same}")
            static = best_seconds(lambda ids=ids: rlvr_generate(model, tokenizer, ids, args.new_tokens, static=True),
                                  args.repeats)
            equal = torch.equal(rlvr_generate(model, tokenizer, ids, args.new_tokens, static=True),
                                rlvr_generate(model, tokenizer, ids, args.new_tokens))
            print(f"{b:>5}  {'rlvr static':<22} {static:8.2f} {tokens / static:9.1f} {hf / static:6.2f}   "
                  f"tokens equal to rlvr's: {equal}")
            if args.hf_compile:
                compiled = best_seconds(lambda ids=ids: hf_compiled(model, tokenizer, ids, args.new_tokens),
                                        args.repeats)
                print(f"{b:>5}  {'HF static + compile':<22} {compiled:8.2f} {tokens / compiled:9.1f} "
                      f"{hf / compiled:6.2f}")
            if b >= 8 and b % 8 == 0:
                grouped = best_seconds(
                    lambda ids=ids, b=b: rlvr_generate(model, tokenizer, ids[: b // 8], args.new_tokens, 8),
                    args.repeats)
                print(f"{b:>5}  {'rlvr, ' + str(b // 8) + ' prompts x 8':<22} {grouped:8.2f} {tokens / grouped:9.1f} "
                      f"{hf / grouped:6.2f}")


if __name__ == "__main__":
    main()
