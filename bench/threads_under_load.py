"""A GRPO step of the default job, alone and beside one competing process, under each threading setting.

    python bench/threads_under_load.py [--prompts 2] [--steps 2] [--settings default,passive,...] [--set KEY=VALUE]

Each setting runs in a fresh process (OpenMP reads its environment once, when torch is imported), on
SmolLM2-135M-Instruct and 1-digit arithmetic as `rlvr train` runs them, with `--prompts` prompts × 8
completions per step. The competitor is another torch process multiplying matrices on as many threads
as torch gives it, as a second training job would. Reported per setting and condition: the median
wall time and CPU time of the steps after the first (the first warms caches and allocators).

Settings:
    default      torch's defaults (what rlvr did before it chose): threads = cores, OpenMP spins while idle
    affinity     threads = the CPUs this process may run on (os.sched_getaffinity), else as default
    passive      OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads sleep instead of spinning
    passive+1    passive, and one inter-op thread
    spin10k      idle OpenMP threads spin 10,000 times (GOMP_SPINCOUNT; torch's default is 300,000), then sleep
    spin30k      30,000 spins, then sleep
    rlvr         what rlvr sets: passive, but libgomp (torch's OpenMP on Linux) spins 10,000 times first
    spin100k     100,000 spins, then sleep
    one          a single intra-op thread
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SETTINGS = {
    "default": ({}, {}),
    "affinity": ({}, {"threads": "affinity"}),
    "passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, {}),
    "passive+1": ({"OMP_WAIT_POLICY": "PASSIVE"}, {"interop": 1}),
    "spin10k": ({"GOMP_SPINCOUNT": "10000"}, {}),
    "rlvr": ({"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"}, {}),
    "spin30k": ({"GOMP_SPINCOUNT": "30000"}, {}),
    "spin100k": ({"GOMP_SPINCOUNT": "100000"}, {}),
    "one": ({}, {"threads": 1}),
}
# The variables a setting controls, cleared from the inherited environment so each starts from torch's defaults.
CONTROLLED = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "GOMP_SPINCOUNT", "RLVR_OMP_WAIT_POLICY")

COMPETITOR = """
import torch
a = torch.randn(1024, 1024)
while True:
    a = torch.tanh(a @ a) * 0.5
"""


def child(options: dict, steps: int, prompts: int, out: str, sets: tuple[str, ...] = ()) -> None:
    """Run `steps` GRPO steps of the default job (with the settings `sets`) in this process and write their
    timings to `out`."""
    import torch

    if options.get("interop"):
        torch.set_num_interop_threads(options["interop"])
    threads = options.get("threads", 0)
    if threads == "affinity":
        threads = len(os.sched_getaffinity(0))
    if threads:
        torch.set_num_threads(threads)
    from rlvr.config import load_config
    from rlvr.grpo.trainer import Trainer
    from rlvr.run.process import keep_freed_memory

    keep_freed_memory()  # the heap as `rlvr train` keeps it (the threads are what this measures)

    with tempfile.TemporaryDirectory() as run:
        config = load_config(None, [f"sampling.batch_size={8 * prompts}", f"threads={threads}", "eval_before=false",
                                    "eval_after=false", "sample_every=0", f"output_dir={run}/run", *sets],
                             max_steps=steps)
        trainer = Trainer(config)
        wall, cpu = [], []
        for _ in range(steps):
            w, c = time.perf_counter(), time.process_time()
            trainer.step()
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
    json.dump({"wall": wall, "cpu": cpu, "threads": torch.get_num_threads(),
               "interop": torch.get_num_interop_threads()}, open(out, "w"))


def measure(name: str, loaded: bool, steps: int, prompts: int, sets: tuple[str, ...] = ()) -> dict:
    env_vars, options = SETTINGS[name]
    env = {k: v for k, v in os.environ.items() if k not in CONTROLLED} | env_vars
    competitor = None
    if loaded:
        competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR], env={k: v for k, v in os.environ.items()
                                                                              if k not in CONTROLLED})
        time.sleep(2)
    try:
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            subprocess.run([sys.executable, __file__, "--child", json.dumps(options), "--steps", str(steps),
                            "--prompts", str(prompts), "--out", out.name, *[a for kv in sets for a in ("--set", kv)]],
                           env=env, check=True, timeout=3600)
            result = json.load(open(out.name))
    finally:
        if competitor:
            competitor.kill()
            competitor.wait()
    later = slice(1, None) if steps > 1 else slice(None)
    return {"wall": statistics.median(result["wall"][later]), "cpu": statistics.median(result["cpu"][later]),
            "threads": result["threads"], "interop": result["interop"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=2, help="prompts per step, 8 completions each (the job: 8)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--settings", default=",".join(SETTINGS))
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the job, e.g. model.name=tiny (repeatable)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        return child(json.loads(args.child), args.steps, args.prompts, args.out, tuple(args.sets))
    from machine import job_precision, machine_line  # (bench/; not in the child, which imports torch itself)

    names = args.settings.split(",")
    print(f"{len(os.sched_getaffinity(0))} CPUs; {args.prompts} prompts × 8 completions, 64 tokens; "
          f"median of steps 2..{args.steps}", flush=True)
    rows = []
    for name in names:
        quiet = measure(name, False, args.steps, args.prompts, tuple(args.sets))
        loaded = measure(name, True, args.steps, args.prompts, tuple(args.sets))
        rows.append((name, quiet, loaded))
        print(f"  measured {name}: quiet {quiet['wall']:.1f} s, loaded {loaded['wall']:.1f} s", flush=True)
    base_q, base_l = rows[0][1]["wall"], rows[0][2]["wall"]
    print(f"\n{machine_line(job_precision(args.sets, 'auto'), 'auto')}")
    print(f"| setting | threads / interop | quiet s/step | quiet CPU s | loaded s/step | loaded CPU s "
          f"| quiet vs {names[0]} | loaded vs {names[0]} |")
    print("|---|---|---|---|---|---|---|---|")
    for name, quiet, loaded in rows:
        print(f"| {name} | {quiet['threads']} / {quiet['interop']} | {quiet['wall']:.1f} | {quiet['cpu']:.1f} "
              f"| {loaded['wall']:.1f} | {loaded['cpu']:.1f} | {quiet['wall'] / base_q:.2f}× | "
              f"{loaded['wall'] / base_l:.2f}× |")


if __name__ == "__main__":
    main()
