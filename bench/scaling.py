"""The benchmark job on one process against the same job data-parallel on N processes (torchrun), under
each strategy (DDP, FSDP2).

    python bench/scaling.py [--steps 4] [--nproc 2] [--threads 2] [--strategies ddp,fsdp]

The job is bench/grpo_vs_trl.py's (SmolLM2-135M-Instruct, 4 prompts x 8 completions, <= 128 tokens,
T = 1.0). Both runs go through `rlvr train` as a user starts them: one process with --threads threads,
and `rlvr train --nproc N` (each rank with threads / N threads on a CPU host; one GPU each on a GPU
host). Reported from metrics.jsonl, over the steps after the first (which warms caches): the median
step time, steps/hour, completion tokens/s, the peak memory of the largest process (RSS on CPU, allocated
GPU memory on CUDA), and the wall time of the whole command, start-up included.

On a 2-core CPU no speed-up is expected: the table says what the data-parallel machinery costs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from grpo_vs_trl import job_parser, make_job  # noqa: E402
from machine import job_precision, machine_line  # noqa: E402
from rlvr_job import job_overrides  # noqa: E402


def run(job: dict, nproc: int, threads: int, out: Path, strategy: str = "ddp") -> dict:
    """One `rlvr train` of the job on `nproc` processes; its step statistics."""
    run_dir = out / f"scaling_{nproc}proc_{strategy}"
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    job = {**job, "threads": 0 if nproc > 1 else threads, "output_dir": str(run_dir),
           "overrides": [f"distributed.strategy={strategy}"]}
    sets = [a for kv in job_overrides(job) for a in ("--set", kv)]
    env = {**os.environ, **({"OMP_NUM_THREADS": str(max(1, threads // nproc))} if nproc > 1 else {})}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rlvr", "train", "--nproc", str(nproc), *sets, "--max-steps",
                    str(job["steps"])], env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()][1:]
    seconds = statistics.median(m["step_seconds"] for m in metrics)
    completions = job["group_size"] * job["prompts_per_step"]
    tokens = statistics.median(m["completion_length/mean"] * completions / m["step_seconds"] for m in metrics)
    return {"processes": nproc, "strategy": strategy if nproc > 1 else "-",
            "threads_each": threads if nproc == 1 else max(1, threads // nproc),
            "s_per_step": seconds, "steps_per_hour": 3600 / seconds, "completion_tok_s": tokens,
            "peak_gb": max(m["memory/peak_gb"] for m in metrics), "wall_s": wall}


def main() -> None:
    p = job_parser(__doc__.splitlines()[0], steps=4)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--strategies", default="ddp,fsdp")
    args = p.parse_args()
    threads = args.threads or len(os.sched_getaffinity(0))
    job, out, _ = make_job(args)
    rows = [run(job, 1, threads, out)] + [run(job, args.nproc, threads, out, s) for s in args.strategies.split(",")]
    print(f"\n{args.steps} steps ({args.steps - 1} timed) of {args.prompts_per_step} prompts x {args.group_size} "
          f"completions, <= {args.max_new_tokens} tokens, {threads} threads in all")
    print(machine_line(job_precision([], "auto"), "auto"))
    print(f"{'processes':<18} {'strategy':>8} {'s/step':>7} {'steps/h':>8} {'compl tok/s':>11} {'peak/process':>12} "
          f"{'wall':>7}")
    one = rows[0]
    for r in rows:
        print(f"{r['processes']} x {r['threads_each']} thread(s){'':4} {r['strategy']:>8} {r['s_per_step']:7.1f} "
              f"{r['steps_per_hour']:8.0f} {r['completion_tok_s']:11.1f} {r['peak_gb']:10.2f}GB {r['wall_s']:6.0f}s")
    for many in rows[1:]:
        print(f"{'ratio to 1':<18} {many['strategy']:>8} {many['s_per_step'] / one['s_per_step']:7.2f} "
              f"{many['steps_per_hour'] / one['steps_per_hour']:8.2f} "
              f"{many['completion_tok_s'] / one['completion_tok_s']:11.2f} "
              f"{many['peak_gb'] / one['peak_gb']:11.2f}x {many['wall_s'] / one['wall_s']:6.2f}x")
    (out / "scaling.json").write_text(json.dumps({"job": job, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
