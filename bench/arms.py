"""Controlled runs: one config, arms that each change it one way, every arm trained with the same seeds; per
arm the held-out accuracy after training and at the curve's peak, how many runs end within their peak's 95%
interval, the gain, and the difference from the first arm (the baseline) seed by seed.

    .venv/bin/python bench/arms.py --config configs/addition.yaml --arm constant \
        --arm lr1e-5:optim.lr=1e-5 --arm group16:sampling.group_size=16,sampling.batch_size=128 \
        [--seeds 0 1 2] [--parallel 2] [--set KEY=VALUE ...] [--out runs/arms/addition]
    .venv/bin/python bench/arms.py --report OUT [--baseline NAME]      # the arms run already, OUT/ARM/seed-S

An arm is NAME or NAME:KEY=VALUE,KEY=VALUE (its changes, on top of --config and the --set given to every
arm). Runs go seed by seed, every arm's seed 0 before any seed 1, `--parallel` at a time (each as
`bench/learning.py` runs a seed: `rlvr train`, cores / parallel threads), so a study cut short still
compares every arm on the seeds it finished; a run that fails is reported and the others go on, and a run
that finished is not run again. The same seed draws the same training order and held-out problems in every
arm, so "after − baseline" pairs runs that saw the same problems. Writes arms.json and arms.png (each arm's
mean held-out curve) to --out.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("learning", ROOT / "bench" / "learning.py")
learning = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(learning)  # type: ignore[union-attr]


def parse_arm(text: str) -> tuple[str, list[str]]:
    """NAME or NAME:KEY=VALUE,KEY=VALUE -> (NAME, ["KEY=VALUE", ...])."""
    name, _, changes = text.partition(":")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise SystemExit(f"bench/arms.py: arm name {name!r} must be letters, digits, '.', '_' or '-' "
                         "(it names the arm's folder), e.g. --arm lr1e-5:optim.lr=1e-5")
    sets = [item.strip() for item in changes.split(",") if item.strip()]
    for item in sets:
        if "=" not in item:
            raise SystemExit(f"bench/arms.py: arm {name!r} change {item!r} is not KEY=VALUE")
    return name, sets


def jobs(arms: list[tuple[str, list[str]]], seeds: list[int]) -> list[tuple[str, list[str], int]]:
    """(arm, its changes, seed), seed by seed: every arm's first seed before any arm's second."""
    return [(name, sets, seed) for seed in seeds for name, sets in arms]


def run_arm(config: str, job: tuple[str, list[str], int], threads: int, common: list[str], out: Path) -> str | None:
    """Train one arm's seed (skipped when finished); None when it ran, else what failed."""
    name, sets, seed = job
    (out / name).mkdir(parents=True, exist_ok=True)
    try:
        learning.train(config, seed, threads, [*common, *sets], out / name)
    except subprocess.CalledProcessError:
        return f"{name} seed {seed} failed: see {out / name / f'seed-{seed}.log'}"
    return None


def read_arms(out: Path, order: list[str]) -> dict[str, list[dict]]:
    """Every arm's finished runs (OUT/ARM/seed-S with a summary.json), arms in `order` then by name."""
    found = sorted(d.name for d in out.iterdir() if d.is_dir() and any(d.glob("seed-*/summary.json")))
    names = [n for n in order if n in found] + [n for n in found if n not in order]
    return {name: [learning.read_run(run.parent) for run in
                   sorted((out / name).glob("seed-*/summary.json"), key=lambda p: int(p.parent.name[5:]))]
            for name in names}


def compare(rows: dict[str, list[dict]], baseline: str) -> list[dict]:
    """Per arm over its seeds: after, peak, gain (mean and sd), runs within their peak's interval, and the
    difference of its final accuracy from the baseline's on each seed both finished."""
    base = {r["seed"]: r["after"] for r in rows.get(baseline, [])}
    table = []
    for name, runs in rows.items():
        diffs = {r["seed"]: r["after"] - base[r["seed"]] for r in runs if r["seed"] in base}
        table.append({"arm": name, "seeds": [r["seed"] for r in runs],
                      **{k: learning.over_seeds([r[k] for r in runs]) for k in ("after", "peak", "gain")},
                      "holds": sum(r["holds"] for r in runs),
                      "vs_baseline": diffs if name != baseline else {},
                      "vs_baseline_mean": statistics.fmean(diffs.values()) if diffs and name != baseline else None})
    return table


def markdown(table: list[dict], changes: dict[str, list[str]], baseline: str) -> str:
    """The comparison as a Markdown table, in percent."""
    def spread(a: dict) -> str:
        return f"{100 * a['mean']:.1f}" + (f" ± {100 * a['sd']:.1f}" if a["sd"] is not None else "")

    lines = ["| arm | change | seeds | after | peak | ends in peak's interval | gain "
             f"| after − {baseline}, by seed |", "|---|---|---|---|---|---|---|---|"]
    for t in table:
        by_seed = ", ".join(f"{100 * d:+.1f} (seed {seed})" for seed, d in t["vs_baseline"].items())
        versus = f"{by_seed} (mean {100 * t['vs_baseline_mean']:+.1f})" if t["vs_baseline"] else "–"
        lines.append(f"| {t['arm']} | {', '.join(changes.get(t['arm'], [])) or '–'} | "
                     f"{' '.join(map(str, t['seeds']))} | {spread(t['after'])} | {spread(t['peak'])} | "
                     f"{t['holds']} of {len(t['seeds'])} | {spread(t['gain'])} | {versus} |")
    return "\n".join(lines)


def plot(runs: dict[str, list[dict]], out: Path) -> None:
    """arms.png: each arm's held-out accuracy against step, the mean over the seeds every arm finished (over
    its own seeds where they share none)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shared = set.intersection(*({r["seed"] for r in arm} for arm in runs.values()))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, arm in runs.items():
        arm = [r for r in arm if r["seed"] in shared] or arm  # the seeds every arm finished, where there are
        common = sorted(set.intersection(*(set(s for s, _, _ in r["curve"]) for r in arm)))
        seeds = ", ".join(str(r["seed"]) for r in arm)
        ax.plot(common, [statistics.fmean(100 * a["mean"] for r in arm for s, a, _ in r["curve"] if s == step)
                         for step in common], marker="o", label=f"{name} (seeds {seeds})")
    ax.set(xlabel="step", ylabel="held-out accuracy, strict (%)", title="held-out accuracy, mean over seeds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "arms.png", dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", help="the config every arm starts from (rlvr train --config)")
    p.add_argument("--arm", dest="arms", action="append", default=[], help="NAME or NAME:KEY=VALUE,KEY=VALUE")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--parallel", type=int, default=2, help="runs side by side, each with cores / parallel threads")
    p.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE for every arm")
    p.add_argument("--report", type=Path, help="report the arms run already under this folder")
    p.add_argument("--baseline", help="the arm the others are compared with (default: the first)")
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    if not a.report and not (a.config and a.arms):
        p.error("give --config and --arm ... (to train) or --report OUT")
    if a.report and not a.report.is_dir():
        raise SystemExit(f"bench/arms.py: no folder {a.report} (give the --out of a study)")
    arms = [parse_arm(text) for text in a.arms]
    if len({name for name, _ in arms}) < len(arms):
        raise SystemExit("bench/arms.py: two arms have the same name (each names its folder)")
    out = a.report or a.out or ROOT / "runs" / "arms" / Path(a.config).stem
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "arms.json"
    if not arms and saved.is_file():
        arms = [(arm["arm"], arm["changes"]) for arm in json.loads(saved.read_text())["arms"]]
    record = {"config": a.config, "sets": a.sets, "arms": [{"arm": n, "changes": s} for n, s in arms]}
    if a.report and saved.is_file():
        record = json.loads(saved.read_text())  # what the study was run with
    if not a.report:
        threads = max(1, (os.cpu_count() or 1) // a.parallel)
        saved.write_text(json.dumps(record, indent=1))
        failed = [f for f in learning.side_by_side(lambda job: run_arm(a.config, job, threads, a.sets, out),
                                                   jobs(arms, a.seeds), a.parallel, out) if f]
        print("\n".join(failed))
    runs = read_arms(out, [n for n, _ in arms])
    if not runs:
        raise SystemExit(f"bench/arms.py: no finished run under {out} (OUT/ARM/seed-S/summary.json)")
    baseline = a.baseline or next(iter(runs))
    if baseline not in runs:
        raise SystemExit(f"bench/arms.py: no finished run of the baseline arm {baseline!r} (arms: {', '.join(runs)})")
    from machine import runs_line  # (bench/, on the path of a script run as one)

    table = compare({name: [learning.per_run(r) for r in arm] for name, arm in runs.items()}, baseline)
    print(runs_line(r["summary"] for arm in runs.values() for r in arm))
    print(markdown(table, dict(arms), baseline))
    saved.write_text(json.dumps(record | {"baseline": baseline, "table": table}, indent=1))
    plot(runs, out)
    print(f"\nwritten: {saved}, {out / 'arms.png'}")


if __name__ == "__main__":
    main()
