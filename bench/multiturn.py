"""Multi-turn rollouts with the python tool: rlvr's engine (each conversation's KV cache kept across its
turns, rows decoding on while their tool runs) against the turn-synchronous engine it replaced.

    .venv/bin/python bench/multiturn.py [--config configs/multiply_tool.yaml] [--prompts 4] [--repeats 2]
        [--rejoin 1,2,4] [--set KEY=VALUE ...]

Both sample the job's conversations (its prompts, group size, environment and sampling settings) with
the same seeds, from the job's model (SmolLM2; `--set model.name=tiny` for a smoke run). The
turn-synchronous engine is the one rlvr had before: every turn, the live conversations decode in one
batch until the longest message of the turn ends, then all their tool calls run (concurrently), then the
next turn prefills every whole transcript again; it decodes a message to its end-of-turn token even past
a complete tool call. Prints median seconds per rollout, the model tokens written and the tool calls,
and the speed-up over the turn-synchronous engine.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from machine import job_precision, machine_line

from rlvr.config import load_config
from rlvr.deadline import DaemonPool
from rlvr.envs.base import calling, checked_reply, wait_for
from rlvr.envs.rollout import TurnFormat, record_turn
from rlvr.envs.sampling import conversations, sample_conversations
from rlvr.grpo.trainer import Trainer
from rlvr.rollout import SamplingParams, generate, stop_token_ids
from rlvr.seeds import seed_of, seeds_for


def turn_synchronous(model, tokenizer, trajectories, envs, params, *, max_turns, max_tokens, stop_ids, seeds,
                     timeout_s=None, reply_to_cut=False):
    """The engine rlvr had before: one batched `generate` per turn over whole transcripts (turn k of
    conversation i drawn from the seed of (its completion seed, k), as rlvr.envs.turn_by_turn does)."""
    fmt = TurnFormat.of(tokenizer)
    pool = DaemonPool(max(1, min(16, len(trajectories))))
    try:
        for turn_number in range(max_turns):
            live = [i for i, t in enumerate(trajectories) if not t.done]
            if not live:
                break
            room = [max_tokens - len(trajectories[i].ids) for i in live]
            turn = SamplingParams(min(params.max_new_tokens, max(room)), params.temperature, params.top_p,
                                  params.top_k)
            out = generate(model, [trajectories[i].prompt_ids + trajectories[i].ids for i in live], 1, turn,
                           stop_ids=stop_ids, pad_id=tokenizer.pad_token_id,
                           seeds=[seed_of(seeds[i], turn_number) for i in live])
            sampled = []
            for row, left in enumerate(room):
                mask = out.completion_mask[row]
                floors = (out.support_floors[row][mask].tolist() if out.support_floors is not None
                          else [float("-inf")] * int(mask.sum()))
                ids = out.completion_ids[row][mask].tolist()[:left]
                logprobs = list(zip(out.logprobs[row][mask].tolist(), floors))[:left]
                sampled.append((ids, logprobs, bool(ids) and ids[-1] in stop_ids))
            texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids, _, _ in sampled]
            sent = time.monotonic()  # all the turn's tool calls at once, then all their replies
            replies = [pool.submit(calling, envs[i], "step", text) for i, text in zip(live, texts)]
            for i, (ids, logprobs, ended), text, reply in zip(live, sampled, texts, replies):
                answer = checked_reply(envs[i], wait_for(envs[i], "step", reply, timeout_s, sent))
                record_turn(trajectories[i], ids, logprobs, ended, text, answer, fmt, max_turns, max_tokens,
                            reply_to_cut)
    finally:
        pool.close()
    for t in trajectories:
        if not t.done:
            t.done = t.truncated = True
    return trajectories


def timed(sample, repeats: int) -> tuple[float, int, float]:
    """(median seconds, model tokens, tool calls) of `sample()`, a rollout of the examples' conversations."""
    seconds, rollout = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        rollout = sample()
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
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the job, e.g. model.name=tiny (repeatable)")
    args = p.parse_args()
    torch.manual_seed(0)
    trainer = Trainer(load_config(args.config, ["output_dir=/tmp/rlvr-multiturn-bench", "model.device=cpu",
                                                *args.sets]))
    c, env, tokenizer = trainer.config, trainer.config.environment, trainer.tokenizer
    g, group_size = c.generation, c.sampling.group_size
    params = SamplingParams(g.max_new_tokens, g.temperature, g.top_p, g.top_k)
    prompts = trainer.parts.train[:args.prompts]
    examples, messages = [q.example for q in prompts], [q.messages or [] for q in prompts]
    seeds = [s for slot in range(len(prompts)) for s in seeds_for(c.seed, 0, 0, slot, group_size)]  # the same each time

    def synchronous(model):
        def run(trajectories, envs, own):
            turn_synchronous(model, tokenizer, trajectories, envs, params, max_turns=env.max_turns,
                             max_tokens=env.max_tokens, stop_ids=stop_token_ids(model, tokenizer), seeds=own,
                             timeout_s=env.timeout_s, reply_to_cut=env.reply_to_cut)
        return conversations(run, tokenizer, examples, messages, group_size, params, make_env=trainer.source.make_env,
                             seeds=seeds, timeout_s=env.timeout_s)

    def rlvr_engine(model, rejoin: int):  # rlvr.samplers.LocalSampler's, at another environment.rejoin_after
        return sample_conversations(model, tokenizer, examples, messages, group_size, params,
                                    make_env=trainer.source.make_env, max_turns=env.max_turns,
                                    max_tokens=env.max_tokens,
                                    stop_ids=stop_token_ids(model, tokenizer), seeds=seeds, rejoin_after=rejoin,
                                    timeout_s=env.timeout_s, reply_to_cut=env.reply_to_cut)

    rows = []
    base = timed(lambda: trainer.policy.decoding(synchronous), args.repeats)
    rows.append(("turn-synchronous, re-prefilled each turn", *base))
    for rejoin in (int(r) for r in args.rejoin.split(",")):
        rows.append((f"rlvr: KV kept, rejoin_after={rejoin}",
                     *timed(lambda rejoin=rejoin: trainer.policy.decoding(lambda m: rlvr_engine(m, rejoin)),
                            args.repeats)))
    trainer.close()
    n = len(examples) * group_size
    print(f"\n{len(examples)} prompts x {group_size} conversations ({n}), "
          f"{torch.get_num_threads()} threads, median of {args.repeats}")
    print(machine_line(job_precision([f"model.dtype={c.model.dtype}"])))  # (model.device=cpu)
    print("| engine | s/rollout | model tokens | tool calls | model tokens/s | speed-up |\n|---|---|---|---|---|---|")
    for name, seconds, tokens, calls in rows:
        print(f"| {name} | {seconds:.1f} | {tokens} | {calls:.0f} | {tokens / seconds:.0f} | "
              f"{base[0] / seconds:.2f}x |")


if __name__ == "__main__":
    main()
