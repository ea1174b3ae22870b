"""The training reward of a finished run, its first and last steps: did it rise beyond its interval?

    .venv/bin/python bench/reward_curve.py RUN_DIR [--window 5] [--key reward/mean]

Reads RUN_DIR/metrics.jsonl and prints a table: the mean of `--key` over the first and the last `--window`
steps, each with the 95% t-interval of the mean over those steps (a step's value is one batch's mean), and
their difference with its interval (Welch). A rise "beyond its interval" is a last window whose interval lies
above the first one's.
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
    args = p.parse_args()
    lines = [json.loads(x) for x in (args.run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    values = [float(m[args.key]) for m in lines if args.key in m and m[args.key] == m[args.key]]
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


if __name__ == "__main__":
    main()
