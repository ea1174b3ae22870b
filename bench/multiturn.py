"""Multi-turn rollouts with the python tool: rlvr's engine (each conversation's KV cache kept across its
turns, rows decoding on while their tool runs) against the turn-synchronous engine it replaced.

    .venv/bin/python bench/multiturn.py [--config configs/multiply_tool.yaml] [--prompts 4] [--repeats 2]
        [--rejoin 1,2,4]

Both sample the job's conversations (its prompts, group size, environment and sampling settings) with
the same seed, from SmolLM2. The turn-synchronous engine is the one rlvr had before: every turn, the
live conversations decode in one batch until the longest message of the turn ends, then all their
tool calls run (concurrently), then the next turn prefills every whole transcript again; it decodes a
message to its end-of-turn token even past a complete tool call. Prints median seconds per rollout,
the model tokens written and the tool calls, and the speed-up over the turn-synchronous engine.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from rlvr.config import load_config
from rlvr.envs import rollout as engine
from rlvr.envs import sampling
from rlvr.rollout import SamplingParams, generate
from rlvr.train.trainer import Trainer


def turn_synchronous(model, tokenizer, trajectories, envs, params, *, max_turns, max_tokens, stop_ids,
                     generator=None, rejoin_after=0):
    """The engine rlvr had before: one batched `generate` per turn over whole transcripts."""
    fmt = engine.TurnFormat.of(tokenizer)
    for _ in range(max_turns):
        live = [i for i, t in enumerate(trajectories) if not t.done]
        if not live:
            break
        room = [max_tokens - len(trajectories[i].ids) for i in live]
        turn = SamplingParams(min(params.max_new_tokens, max(room)), params.temperature, params.top_p, params.top_k)
        out = generate(model, [trajectories[i].prompt_ids + trajectories[i].ids for i in live], 1, turn,
                       stop_ids=stop_ids, pad_id=tokenizer.pad_token_id, generator=generator)
        sampled = []
        for row, left in enumerate(room):
            mask = out.completion_mask[row]
            ids, logprobs = out.completion_ids[row][mask].tolist()[:left], out.logprobs[row][mask].tolist()[:left]
            sampled.append((ids, logprobs, bool(ids) and ids[-1] in stop_ids))
        texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids, _, _ in sampled]
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(live)))) as pool:
            replies = list(pool.map(lambda pair: pair[0].step(pair[1]), zip([envs[i] for i in live], texts)))
        for i, (ids, logprobs, ended), text, reply in zip(live, sampled, texts, replies):
            engine._record(trajectories[i], ids, logprobs, ended, text, reply, fmt, max_tokens)
    for t in trajectories:
        if not t.done:
            t.done = t.truncated = True
    return trajectories


def timed(trainer: Trainer, examples, params: SamplingParams, repeats: int) -> tuple[float, int, float]:
    """(median seconds, model tokens, tool calls) of sampling the examples' conversations."""
    seconds, rollout = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        rollout = trainer.converse_train(trainer.policy, examples, trainer.config.sampling.group_size, params,
                                         torch.Generator().manual_seed(0))
        seconds.append(time.perf_counter() - started)
    tokens = int(rollout.model_mask.sum())
    calls = sum(info.get("tool_calls", 0.0) for info in rollout.env_info)
    return statistics.median(seconds), tokens, calls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/multiply_tool.yaml")
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--rejoin", default="1,2,4")
    args = p.parse_args()
    torch.manual_seed(0)
    trainer = Trainer(load_config(args.config, ["output_dir=/tmp/rlvr-multiturn-bench", "model.device=cpu"]))
    g = trainer.config.generation
    params = SamplingParams(g.max_new_tokens, g.temperature, g.top_p, g.top_k)
    examples = trainer.parts.train.examples[:args.prompts]
    rows = []
    real = sampling.converse
    sampling.converse = turn_synchronous
    try:
        base = timed(trainer, examples, params, args.repeats)
    finally:
        sampling.converse = real
    rows.append(("turn-synchronous, re-prefilled each turn", *base))
    for rejoin in (int(r) for r in args.rejoin.split(",")):
        trainer.converse_train = sampling.conversation_sampler(
            trainer.tokenizer, trainer.config.environment.__class__(**{**vars(trainer.config.environment),
                                                                      "rejoin_after": rejoin}),
            dict(zip(map(id, trainer.parts.train.examples), trainer.parts.train.messages)), trainer.make_env)
        rows.append((f"rlvr: KV kept, rejoin_after={rejoin}", *timed(trainer, examples, params, args.repeats)))
    n = len(examples) * trainer.config.sampling.group_size
    print(f"\n{len(examples)} prompts x {trainer.config.sampling.group_size} conversations ({n}), "
          f"{torch.get_num_threads()} threads, median of {args.repeats}")
    print("| engine | s/rollout | model tokens | tool calls | model tokens/s | speed-up |\n|---|---|---|---|---|---|")
    for name, seconds, tokens, calls in rows:
        print(f"| {name} | {seconds:.1f} | {tokens} | {calls:.0f} | {tokens / seconds:.0f} | "
              f"{base[0] / seconds:.2f}x |")


if __name__ == "__main__":
    main()
