"""Sampling ahead (`sampling.max_staleness`) against the synchronous loop: the default job and the benchmark
job, each synchronous and with max_staleness 1 and 2, on all the machine's cores.

    .venv/bin/python bench/async.py [--staleness 1 2] [--default-steps 40] [--benchmark-steps 8]
        [--jobs default,benchmark] [--set KEY=VALUE ...]

Every run is `rlvr train` as a user starts it, with --threads set to the cores (sampling ahead gives half to
the worker that samples and half to the trainer; synchronous, sampling and training take turns with all of
them). Reported from metrics.jsonl over the steps after the first (which warms caches): the median step
time (the trainer's, waiting for its batch included), steps/hour and its ratio to the synchronous run, and
for the default job the held-out accuracy after the same number of steps (greedy, strict) with the paired
gain over the untrained model (Newcombe 95%). Writes async.json to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from grpo_vs_trl import make_job  # noqa: E402
from machine import job_precision, machine_line  # noqa: E402
from rlvr_job import job_overrides  # noqa: E402


def run(name: str, sets: list[str], staleness: int | None, steps: int, threads: int, out: Path) -> dict:
    """One `rlvr train`; its step times and, when it evaluated, its held-out accuracy."""
    run_dir = out / f"async_{name}_{'sync' if staleness is None else f'k{staleness}'}"
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    extra = [] if staleness is None else [f"sampling.max_staleness={staleness}"]
    args = [a for kv in [*sets, *extra, f"threads={threads}", f"output_dir={run_dir}"] for a in ("--set", kv)]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rlvr", "train", *args, "--max-steps", str(steps)], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    seconds = statistics.median(m["step_seconds"] for m in metrics[1:])
    row = {"job": name, "staleness": staleness, "s_per_step": seconds, "steps_per_hour": 3600 / seconds,
           "train_s": sum(m["step_seconds"] for m in metrics), "wall_s": wall,
           "staleness_mean": statistics.fmean(m.get("async/staleness_mean", 0.0) for m in metrics)}
    summary_file = run_dir / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    if summary.get("after"):
        row |= {"after": summary["after"]["strict"], "before": summary["before"]["strict"],
                "gain": summary["gain"]["strict"]}
    return row


def percent(interval: dict | None) -> str:
    if not interval:
        return "–"
    return f"{100 * interval['mean']:.1f} [{100 * interval['low']:.1f}, {100 * interval['high']:.1f}]"


def table(rows: list[dict]) -> str:
    """A Markdown table, each run against the synchronous run of its job."""
    sync = {r["job"]: r for r in rows if r["staleness"] is None}
    lines = ["| job | max_staleness | s/step | steps/h | ratio to sync | held-out after (strict) | gain [95%] |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["steps_per_hour"] / sync[r["job"]]["steps_per_hour"] if r["job"] in sync else float("nan")
        gain = ("–" if "gain" not in r else
                f"{100 * r['gain']['mean']:+.1f} [{100 * r['gain']['low']:+.1f}, {100 * r['gain']['high']:+.1f}]")
        lines.append(f"| {r['job']} | {'sync' if r['staleness'] is None else r['staleness']} | {r['s_per_step']:.1f} | "
                     f"{r['steps_per_hour']:.0f} | {ratio:.2f}× | {percent(r.get('after'))} | {gain} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--staleness", type=int, nargs="+", default=[1, 2])
    p.add_argument("--jobs", default="default,benchmark")
    p.add_argument("--default-steps", type=int, default=40)
    p.add_argument("--benchmark-steps", type=int, default=8)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE for every run")
    p.add_argument("--out", default=str(HERE / "results"))
    a = p.parse_args()
    threads = a.threads or len(os.sched_getaffinity(0))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs: dict[str, tuple[list[str], int]] = {"default": (list(a.sets), a.default_steps)}
    if "benchmark" in a.jobs:
        ns = argparse.Namespace(out=str(out), steps=a.benchmark_steps, group_size=8, prompts_per_step=4,
                                max_new_tokens=128, temperature=1.0, lr=1e-5, beta=0.04, seed=0, threads=threads)
        job, _, _ = make_job(ns)
        jobs["benchmark"] = ([kv for kv in job_overrides({**job, "output_dir": "unused"})
                              if not kv.startswith(("output_dir=", "threads="))] + a.sets, a.benchmark_steps)
    rows = [run(name, sets, k, steps, threads, out) for name, (sets, steps) in jobs.items()
            if name in a.jobs.split(",") for k in [None, *a.staleness]]
    print(machine_line(job_precision(a.sets, "auto"), "auto"))
    print(table(rows))
    (out / "async.json").write_text(json.dumps({"threads": threads, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
