"""Multi-turn rollouts with the python tool: rlvr's engine (each conversation's KV cache kept across its
turns, rows decoding on while their tool runs) against driving it turn by turn through `complete`, as engines
that know only token ids are driven (rlvr.envs.turn_by_turn: vLLM's path; rlvr's engine had it before).

    .venv/bin/python bench/multiturn.py [--config configs/multiply_tool.yaml] [--prompts 4] [--repeats 2]
        [--rejoin 1,2,4] [--set KEY=VALUE ...]

Both sample the job's conversations (its prompts, group size, environment and sampling settings) with
the same seeds, from the job's model (SmolLM2; `--set model.name=tiny` for a smoke run). Turn by turn,
the live conversations decode in one batch until the longest message of the turn ends, then all their tool
calls run (concurrently), then the next turn prefills every whole transcript again; a message is decoded to
its end-of-turn token even past a complete tool call (and cut there afterwards). Prints median seconds per
rollout, the model tokens written and the tool calls, and the speed-up over driving it turn by turn.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from machine import job_precision, machine_line

from rlvr.config import load_config
from rlvr.envs.sampling import conversations, sample_conversations
from rlvr.envs.turn_by_turn import take_turns
from rlvr.grpo.trainer import Trainer
from rlvr.rollout import SamplingParams, stop_token_ids
from rlvr.run.process import configure_process
from rlvr.samplers import LocalSampler
from rlvr.seeds import seeds_for


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
    config = load_config(args.config, ["output_dir=/tmp/rlvr-multiturn-bench", "model.device=cpu", *args.sets])
    configure_process(config.threads, config.seed)  # as `rlvr train` sets the process up (threads, seed, heap)
    trainer = Trainer(config)
    c, env, tokenizer = trainer.config, trainer.config.environment, trainer.tokenizer
    g, group_size = c.generation, c.sampling.group_size
    params = SamplingParams(g.max_new_tokens, g.temperature, g.top_p, g.top_k)
    prompts = trainer.parts.train[:args.prompts]
    examples, messages = [q.example for q in prompts], [q.messages or [] for q in prompts]
    seeds = [s for slot in range(len(prompts)) for s in seeds_for(c.seed, 0, 0, slot, group_size)]  # the same each time

    def synchronous(model):  # rlvr.envs.turn_by_turn (how engines that know only token ids are driven), on rlvr's
        engine = LocalSampler(lambda fn: fn(model), tokenizer)

        def run(trajectories, envs, own):
            take_turns(engine.complete, tokenizer, stop_token_ids(model, tokenizer), trajectories, envs, params, own,
                       max_turns=env.max_turns, max_tokens=env.max_tokens, timeout_s=env.timeout_s,
                       reply_to_cut=env.reply_to_cut)
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
    rows.append(("turn by turn through complete, re-prefilled", *base))
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
