"""GRPO against the PPO baseline (critic + GAE) on the same job, both rlvr: step time and peak memory.

    .venv/bin/python bench/ppo_vs_grpo.py [--steps 3] [--group-size 8] [--prompts-per-step 4] [--max-new-tokens 128]

The job is bench/grpo_vs_trl.py's (SmolLM2-135M-Instruct, fp32, β with a reference model). PPO adds a
critic (a copy of the transformer with a scalar head), its gradients and its AdamW state, and a
value forward and backward per step; GRPO's group baseline needs none of them (DeepSeekMath §4.1).
Each trainer runs in its own process so that its peak RSS is its own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grpo_vs_trl import job_parser, make_job, matmul_rate, row, run_job
from machine import job_precision, machine_line


def main() -> None:
    args = job_parser(__doc__.splitlines()[0], steps=3).parse_args()
    job, out, prompt_tokens = make_job(args)
    rate = matmul_rate()
    rows = [row(name, run_job(Path(sys.executable), script, {**job, "output_dir": str(out / f"{script}_run")}, out),
                job, prompt_tokens, rate)
            for name, script in (("GRPO", "rlvr_job"), ("PPO", "ppo_job"))]
    print(f"\n{args.steps} steps of {args.prompts_per_step} prompts x {args.group_size} completions, "
          f"<= {args.max_new_tokens} tokens, beta {args.beta}")
    print(machine_line(job_precision([], "auto"), "auto"))
    print(f"{'trainer':<8} {'s/step':>7} {'mean len':>8} {'peak RSS':>9}")
    for r in rows:
        print(f"{r['engine']:<8} {r['s_per_step']:7.1f} {r['mean_len']:8.1f} {r['peak_gb']:7.2f}GB")
    grpo, ppo = rows
    print(f"GRPO/PPO peak memory {grpo['peak_gb'] / ppo['peak_gb']:.2f}x, "
          f"step time {grpo['s_per_step'] / ppo['s_per_step']:.2f}x "
          "(step times differ also because the two sample different completions)")
    (out / "ppo_vs_grpo.json").write_text(json.dumps({"job": job, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
