"""The paired gain between two evaluations of the same problems: `rlvr eval` directories, greedy answers.

    .venv/bin/python bench/paired_gain.py BEFORE_DIR AFTER_DIR [BEFORE_DIR AFTER_DIR ...]

For a model made in several stages (a cold start, then GRPO), the gain that matters is from the untrained
model to the last stage, on the same held-out problems; a training run's own before/after only covers its
stage. Each pair prints one row: before and after accuracy (strict and lenient) with 95% intervals, and the
paired gain with its interval (Newcombe, as `rlvr train` reports it). With several pairs, the mean gain and
its spread over them. The two directories of a pair must hold the same problems (ids), else it says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from rlvr.evaluate.accuracy import Interval, paired_gain_interval, wilson_interval
from rlvr.evaluate.store import EvalStore

MODES = ("strict", "lenient")


def greedy_verdicts(directory: Path) -> dict[str, dict[str, float]]:
    """Problem id -> mode -> 1.0 / 0.0 for the greedy completion (an unjudged answer counts as wrong)."""
    records = EvalStore(directory).read()
    if not records:
        sys.exit(f"{directory}: no evaluated problems (is it an `rlvr eval` output directory?)")
    return {r.id: {mode: float(bool(r.greedy and r.greedy.correct.get(mode))) for mode in MODES} for r in records}


def row(before_dir: Path, after_dir: Path) -> dict[str, dict[str, Interval]]:
    """Per mode: before, after and the paired gain, as intervals."""
    before, after = greedy_verdicts(before_dir), greedy_verdicts(after_dir)
    if before.keys() != after.keys():
        sys.exit(f"{before_dir} and {after_dir} evaluated different problems: use the same data, seed and limit")
    ids = sorted(before)
    out = {}
    for mode in MODES:
        b, a = [before[i][mode] for i in ids], [after[i][mode] for i in ids]
        out[mode] = {"before": wilson_interval(int(sum(b)), len(b)),
                     "after": wilson_interval(int(sum(a)), len(a)), "gain": paired_gain_interval(b, a)}
    return out


def points(gain: Interval) -> str:
    return f"{100 * gain.mean:+.1f} [{100 * gain.low:+.1f}, {100 * gain.high:+.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="BEFORE_DIR AFTER_DIR pairs")
    args = parser.parse_args()
    if len(args.dirs) % 2:
        parser.error("give the directories in pairs: BEFORE_DIR AFTER_DIR")
    pairs = list(zip(args.dirs[::2], args.dirs[1::2], strict=True))
    from machine import runs_line  # (bench/, on the path of a script run as one)

    gains: dict[str, list[float]] = {mode: [] for mode in MODES}
    print(runs_line(json.loads((d / "summary.json").read_text()) if (d / "summary.json").is_file() else {}
                    for d in args.dirs))  # (`rlvr eval` may not record them: "not recorded")
    print("| before | after | " + " | ".join(f"{m} before | {m} after | {m} gain (points)" for m in MODES) + " |")
    print("|---" * (2 + 3 * len(MODES)) + "|")
    for before_dir, after_dir in pairs:
        r = row(before_dir, after_dir)
        cells = [f"{r[m]['before']} | {r[m]['after']} | **{points(r[m]['gain'])}**" for m in MODES]
        print(f"| {before_dir} | {after_dir} | " + " | ".join(cells) + " |")
        for m in MODES:
            gains[m].append(100 * r[m]["gain"].mean)
    if len(pairs) > 1:
        for m in MODES:
            print(f"{m}: mean gain {statistics.mean(gains[m]):+.1f} ± {statistics.stdev(gains[m]):.1f} points "
                  f"(standard deviation over {len(pairs)} pairs)")


if __name__ == "__main__":
    main()
