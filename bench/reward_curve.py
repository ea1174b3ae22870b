"""The training reward of a finished run, its first and last steps: did it rise beyond its interval?

    .venv/bin/python bench/reward_curve.py RUN_DIR [--window 5] [--key reward/mean] [--control CONTROL_DIR]

Reads RUN_DIR/metrics.jsonl and prints a table: the mean of `--key` over the first and the last `--window`
steps, each with the 95% t-interval of the mean over those steps (a step's value is one batch's mean), and
their difference with its interval (Welch). A rise "beyond its interval" is a last window whose interval lies
above the first one's. With `--control`, a run of the same prompts that did not learn (e.g. learning rate 0): the
run less the control step by step over the last window, with the 95% t-interval of that paired mean.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learning import T95, over_seeds
from machine import runs_line


def difference(first: list[float], last: list[float]) -> tuple[float, float, float]:
    """The last window's mean less the first's, with a Welch 95% interval."""
    va, vb = statistics.variance(first) / len(first), statistics.variance(last) / len(last)
    df = (va + vb) ** 2 / (va ** 2 / (len(first) - 1) + vb ** 2 / (len(last) - 1)) if va + vb else 1.0
    t = T95[max(0, min(len(T95), round(df)) - 1)] if df <= len(T95) else 2.0
    d = statistics.fmean(last) - statistics.fmean(first)
    half = t * math.sqrt(va + vb)
    return d, d - half, d + half


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--key", default="reward/mean")
    p.add_argument("--control", type=Path, help="a control run of the same prompts: the paired gain over it")
    args = p.parse_args()
    values = read(args.run, args.key)
    if len(values) < 2 * args.window or args.window < 2:
        sys.exit(f"{args.run}: {len(values)} steps with {args.key}; need at least twice --window (>= 2) of them")
    first, last = values[:args.window], values[-args.window:]
    a, b = over_seeds(first), over_seeds(last)  # (a window's steps as the samples)
    d, low, high = difference(first, last)
    summary = args.run / "summary.json"  # (a run stopped early has none)
    print(runs_line([json.loads(summary.read_text()) if summary.is_file() else {}]))
    print(f"| {args.key} ({len(values)} steps) | mean | 95% interval |")
    print("|---|---|---|")
    print(f"| first {args.window} steps | {a['mean']:.3f} | [{a['low']:.3f}, {a['high']:.3f}] |")
    print(f"| last {args.window} steps | {b['mean']:.3f} | [{b['low']:.3f}, {b['high']:.3f}] |")
    print(f"| last − first | {d:+.3f} | [{low:+.3f}, {high:+.3f}] |")
    print(f"beyond its interval: {'yes' if b['low'] > a['high'] else 'no'}")
    if args.control is not None:
        control = read(args.control, args.key)
        steps = min(len(values), len(control))
        window = slice(steps - args.window, steps)
        paired = over_seeds([r - c for r, c in zip(values[window], control[window])])
        print(f"| run − control, steps {steps - args.window + 1}–{steps}, paired | {paired['mean']:+.3f} | "
              f"[{paired['low']:+.3f}, {paired['high']:+.3f}] |")


def read(run: Path, key: str) -> list[float]:
    """`key` of each step in run/metrics.jsonl (NaN steps left out)."""
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [float(m[key]) for m in lines if key in m and m[key] == m[key]]


if __name__ == "__main__":
    main()
