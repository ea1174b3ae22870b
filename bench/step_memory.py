"""Where a GRPO step's peak memory comes from: peak RSS after each phase of one step of the benchmark job.

    .venv/bin/python bench/step_memory.py [--steps 1] [--rlvr-set KEY=VALUE ...]

The job is bench/grpo_vs_trl.py's (SmolLM2-135M, 4 prompts × 8, ≤ 128 tokens, β = 0.04, fp32); the
settings under test are given as --rlvr-set, e.g. `--rlvr-set "model.lora={rank: 16}" --rlvr-set
optim.micro_batch_tokens=512`. Prints the process's peak RSS and current RSS after building the
trainer, sampling, the log-prob passes and the update, and each phase's seconds. Run each setting in
its own process: peak RSS only grows.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from grpo_vs_trl import job_parser, make_job  # noqa: E402
from machine import job_precision, machine_line  # noqa: E402
from rlvr_job import job_config  # noqa: E402

LAST = [time.perf_counter()]


def rss(phase: str) -> None:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    now = int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()
    seconds, LAST[0] = time.perf_counter() - LAST[0], time.perf_counter()
    print(f"| {phase} | {peak / 1e9:.2f} GB | {now / 1e9:.2f} GB | {seconds:.1f} |", flush=True)


def main() -> None:
    p = job_parser(__doc__.splitlines()[0], steps=1)
    p.add_argument("--rlvr-set", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args()
    job, out, _ = make_job(args)
    config = job_config({**job, "overrides": args.rlvr_set, "output_dir": str(out / "step_memory")})

    from rlvr.grpo.trainer import Trainer
    from rlvr.rl.batch import make_batch
    from rlvr.rl.update import policy_update
    from rlvr.run.process import configure_process

    print(f"settings: {args.rlvr_set or 'the defaults'}\n\n"
          f"{machine_line(job_precision(args.rlvr_set, 'auto'), 'auto')}\n"
          "| after | peak RSS | RSS now | phase seconds |\n|---|---|---|---|")
    rss("start")
    configure_process(config.threads, config.seed)  # as `rlvr train` sets the process up (threads, seed, heap)
    trainer = Trainer(config)
    rss("building the trainer")
    print(f"\n{trainer.memory_plan or 'no memory plan (the model shapes were not read before it loaded)'}\n")
    a, o, g = config.algorithm, config.optim, config.generation
    for step in range(1, args.steps + 1):  # Trainer.step()'s phases, each measured apart
        scored, _ = trainer.source.take(trainer.step_count)
        rss(f"step {step}: sampling")
        batch = make_batch(scored, trainer.advantages(scored), policy=trainer.policy, algo=a,
                           micro_batch_tokens=o.no_grad_tokens, temperature=g.temperature,
                           stale=scored.rollout.version < trainer.step_count)
        rss(f"step {step}: log-prob passes")
        for _ in range(a.updates_per_batch):
            policy_update(trainer.policy, trainer.optimizer, trainer.scheduler, batch, algo=a,
                          micro_batch_tokens=o.micro_batch_tokens, temperature=g.temperature,
                          max_grad_norm=o.max_grad_norm, max_new_tokens=g.max_new_tokens)
        rss(f"step {step}: update")
        trainer.advance()  # the step counted, the sampler given the new weights, π_ref refreshed when due
        rss(f"step {step}: weights")
    trainer.close()


if __name__ == "__main__":
    main()
