"""Learning over seeds: one config trained with N seeds, its held-out accuracy before, after, at its peak and
at the checkpoint keep_best chose, with the spread over seeds and intervals, and the curves.

    .venv/bin/python bench/learning.py --config configs/addition.yaml [--seeds 0 1 2] [--parallel 2]
        [--set KEY=VALUE ...] [--out runs/learning/addition]
    .venv/bin/python bench/learning.py --seeds 0 1 2     # the default job (`rlvr train`), runs/learning/default
    .venv/bin/python bench/learning.py --seeds 0 1 2 --control random    # each seed beside its control run
    .venv/bin/python bench/learning.py --report RUN_DIR [RUN_DIR ...] [--out DIR]   # runs made already

Each seed is `rlvr train --config C --set seed=S` in OUT/seed-S (a seed whose run finished is not run
again), `--parallel` of them at a time, each with cores / parallel threads (at one thread a run is
bit-reproducible; on this 2-core machine two 1-thread runs side by side finish sooner than one after the
other at two threads). Give `--set eval_every=N` for a curve.

Per run: before, after, the peak of the curve (the best held-out accuracy of any evaluated step:
optimistic, since it is chosen on the numbers it reports), the checkpoint chosen on the validation slice
(keep_best; its held-out accuracy is an honest estimate), whether the run ends within the 95% interval of
its peak, and the paired gain with its interval (Newcombe). With `--control random` (or `format`), each seed
also runs as a control (`rlvr train --control`, in OUT/control-random/seed-S: the same seed, data order and
everything else, trained on coins at each reward's rate; rlvr.rewards.control): its accuracy after training, and
the run's paired gain over it (`rlvr compare`), what the rewards themselves taught. Over seeds: the mean with the
standard deviation and a 95% t-interval of the mean. Writes learning.json, curves.png (held-out accuracy against
step, every seed and the mean) and metrics.png (the step metrics beside it: reward, entropy, KL, clip
fractions, zero-variance share, length, learning rate, gradient norm) to --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # (this folder's machine.py, also when imported by a test)
from machine import runs_line  # noqa: E402

# two-sided 95% quantiles of Student's t for 1..10 degrees of freedom (beyond: the normal's 1.96 would be
# optimistic by < 10%, so 2.0 from 11 on)
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
MODES = ("strict", "lenient")
T = TypeVar("T")
R = TypeVar("R")
STEP_METRICS = ("accuracy", "reward/std", "entropy", "kl", "clip_high_fraction", "clip_low_fraction",
                "zero_variance_fraction", "completion_length/mean", "lr", "grad_norm")


def train(config: str | None, seed: int, threads: int, sets: list[str], out: Path, control: str | None = None) -> Path:
    """The run of one seed (skipped when it finished already), or its control run; config None: the default job."""
    home = out / f"control-{control}" if control else out
    home.mkdir(parents=True, exist_ok=True)
    run = home / f"seed-{seed}"
    if (run / "summary.json").is_file():
        return run
    command = [sys.executable, "-m", "rlvr", "train", *(["--config", config] if config else []),
               "--set", f"seed={seed}", "--set", f"threads={threads}", "--output-dir", str(run),
               *(["--control", control] if control else [])]
    for item in sets:
        command += ["--set", item]
    resume = ["--resume", str(run)] if (run / "checkpoints").is_dir() else []
    log = (home / f"seed-{seed}.log").open("w")
    subprocess.run(command if not resume else [sys.executable, "-m", "rlvr", "train", *resume], check=True,
                   stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    return run


def side_by_side(train_one: Callable[[T], R], jobs: list[T], parallel: int, out: Path) -> list[R]:
    """`train_one` of every job, `parallel` at a time, in order. Ctrl-C ends it in one line: each run stopped at
    a checkpoint of its own (rlvr train saves on SIGINT), finished runs kept, queued ones never started."""
    try:
        with ThreadPoolExecutor(parallel) as pool:
            return list(pool.map(train_one, jobs))
    except KeyboardInterrupt:
        raise SystemExit(f"bench/{Path(sys.argv[0]).name}: interrupted; the runs under {out} stopped at checkpoints "
                         "and the finished ones are kept: run the same command again to go on from there") from None


def read_run(run: Path) -> dict:
    """What one finished run measured: its summary, its held-out curve and its step metrics."""
    summary = json.loads((run / "summary.json").read_text())
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    before = summary["before"]
    curve = [(0, before["strict"], before["n"])] + [
        (m["step"], _interval_at(m, summary), before["n"]) for m in steps if "eval/strict" in m]
    if summary["after"] and curve[-1][0] != summary["steps"]:
        curve.append((summary["steps"], summary["after"]["strict"], before["n"]))
    return {"run": str(run), "seed": summary["seed"], "summary": summary, "curve": curve,
            "metrics": [{k: m[k] for k in ("step", *STEP_METRICS) if k in m} for m in steps]}


def _interval_at(metrics: dict, summary: dict) -> dict:
    """The held-out accuracy logged at a step, with its Wilson interval (n as in the summary)."""
    from rlvr.evaluate.accuracy import wilson_interval

    n = summary["before"]["n"]
    return wilson_interval(round(metrics["eval/strict"] * n), n).__dict__


def against_control(row: dict, run: Path, control: Path) -> dict:
    """`row` with the control's accuracy after training and the run's paired gain over it (rlvr compare)."""
    from rlvr.evaluate.compare import compare_runs

    compared = compare_runs(run, control)["strict"]
    gain = compared["gain_over_control"]
    return row | {"control": compared["control"]["mean"], "over_control": gain["mean"],
                  "over_control_low": gain["low"], "over_control_high": gain["high"]}


def per_run(r: dict) -> dict:
    """One run's row: before, after, peak, chosen (keep_best), ends within the peak's interval, gain."""
    s, curve = r["summary"], r["curve"]
    peak_step, peak, _ = max(curve[1:] or curve, key=lambda point: point[1]["mean"])  # the earliest of ties
    best = s.get("best") or {}
    row = {"seed": r["seed"], "before": s["before"]["strict"]["mean"], "after": s["after"]["strict"]["mean"],
           "peak": peak["mean"], "peak_step": peak_step, "peak_low": peak["low"],
           "gain": s["gain"]["strict"]["mean"], "gain_low": s["gain"]["strict"]["low"],
           "gain_high": s["gain"]["strict"]["high"]}
    row["holds"] = row["after"] >= peak["low"]  # the last checkpoint within the peak's 95% interval
    if best:
        row |= {"chosen": best["heldout"]["strict"]["mean"], "chosen_step": best["step"],
                "chosen_gain": best["gain"]["strict"]["mean"]}
    for when in ("before", "after"):
        alone = (s[when] or {}).get("alone")
        if alone:
            for mode in ("strict", "lenient"):
                row[f"{when}_alone_{mode}"] = alone[mode]["mean"]
    return row


def over_seeds(values: list[float]) -> dict:
    """Mean, standard deviation and the 95% t-interval of the mean over seeds."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "sd": None, "low": None, "high": None, "n": len(values)}
    sd = statistics.stdev(values)
    half = (T95[len(values) - 2] if len(values) - 1 <= len(T95) else 2.0) * sd / math.sqrt(len(values))
    return {"mean": mean, "sd": sd, "low": mean - half, "high": mean + half, "n": len(values)}


def table(rows: list[dict]) -> str:
    """The per-seed rows and the row over seeds, in percent (a Markdown table)."""
    pct = lambda v: "–" if v is None else f"{100 * v:.1f}"  # noqa: E731
    chosen, alone = any("chosen" in r for r in rows), any("after_alone_strict" in r for r in rows)
    controlled = all("control" in r for r in rows)
    interval = lambda m, lo, hi: f"{100 * m:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"  # noqa: E731
    head = ["seed", "before", "after", "peak (step)", "ends in peak's interval", "gain [95%]"]
    head += ["control: after", "gain over the control [95%]"] if controlled else []
    head += ["chosen by validation (step)", "its gain"] if chosen else []
    head += ["question alone, strict: before → after", "lenient: before → after"] if alone else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["seed"]), pct(r["before"]), pct(r["after"]), f"{pct(r['peak'])} ({r['peak_step']})",
                 "yes" if r["holds"] else "**no**",
                 interval(r["gain"], r["gain_low"], r["gain_high"])]
        if controlled:
            cells += [pct(r["control"]), interval(r["over_control"], r["over_control_low"], r["over_control_high"])]
        if chosen:
            gain = r.get("chosen_gain")
            cells += [f"{pct(r.get('chosen'))} ({r.get('chosen_step', '–')})",
                      "–" if gain is None else f"{100 * gain:+.1f}"]
        if alone:
            cells += [f"{pct(r.get(f'before_alone_{m}'))} → {pct(r.get(f'after_alone_{m}'))}" for m in MODES]
        lines.append("| " + " | ".join(cells) + " |")
    keys = ("before", "after", "peak", "gain", "control", "over_control", "chosen", "chosen_gain",
            *(f"{w}_alone_{m}" for m in MODES for w in ("before", "after")))
    agg = {k: over_seeds([r[k] for r in rows if k in r]) for k in keys if any(k in r for r in rows)}
    fmt = lambda a: (f"{100 * a['mean']:.1f} ± {100 * a['sd']:.1f}" if a["sd"] is not None  # noqa: E731
                     else f"{100 * a['mean']:.1f}")
    gain = agg["gain"]
    gain_text = fmt(gain) + (f" [{100 * gain['low']:+.1f}, {100 * gain['high']:+.1f}]"
                             if gain["low"] is not None else "")
    cells = [f"mean ± sd ({len(rows)} seeds)", fmt(agg["before"]), fmt(agg["after"]), fmt(agg["peak"]),
             f"{sum(r['holds'] for r in rows)} of {len(rows)}", gain_text]
    if controlled:
        over = agg["over_control"]
        cells += [fmt(agg["control"]), fmt(over) + (f" [{100 * over['low']:+.1f}, {100 * over['high']:+.1f}]"
                                                    if over["low"] is not None else "")]
    if chosen:
        cells += [fmt(agg["chosen"]), fmt(agg["chosen_gain"])]
    if alone:
        cells += [f"{fmt(agg[f'before_alone_{m}'])} → {fmt(agg[f'after_alone_{m}'])}" for m in MODES]
    lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: list[dict], out: Path) -> None:
    """curves.png: held-out accuracy against step; metrics.png: the step metrics, every seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in runs:
        steps, acc = zip(*((s, 100 * a["mean"]) for s, a, _ in r["curve"]))
        ax.plot(steps, acc, marker="o", alpha=0.6, label=f"seed {r['seed']}")
    common = sorted(set.intersection(*(set(s for s, _, _ in r["curve"]) for r in runs)))
    means = [statistics.fmean(100 * a["mean"] for r in runs for s, a, _ in r["curve"] if s == step) for step in common]
    ax.plot(common, means, color="black", linewidth=2.5, label="mean")
    ax.set(xlabel="step", ylabel="held-out accuracy, strict (%)", title="held-out accuracy (greedy)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=110)
    names = [k for k in STEP_METRICS if any(k in m for r in runs for m in r["metrics"])]
    fig, axes = plt.subplots(math.ceil(len(names) / 4), 4, figsize=(14, 2.6 * math.ceil(len(names) / 4)))
    for ax, name in zip(axes.flat, names):
        for r in runs:
            ax.plot([m["step"] for m in r["metrics"] if name in m], [m[name] for m in r["metrics"] if name in m],
                    alpha=0.7)
        ax.set_title(name, fontsize=9)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(out / "metrics.png", dpi=90)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", help="the config to train (rlvr train --config; default: the default job)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--parallel", type=int, default=2, help="runs side by side, each with cores / parallel threads")
    p.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE for every run")
    p.add_argument("--control", choices=["random", "format"],
                   help="also run each seed as a control (rlvr train --control) and report the gain over it")
    p.add_argument("--report", nargs="+", type=Path, help="report these finished runs instead of training")
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    job = Path(a.config).stem if a.config else "default"
    out = a.out or (Path(a.report[0]).parent if a.report else ROOT / "runs" / "learning" / job)
    out.mkdir(parents=True, exist_ok=True)
    controls: list[Path] = []
    if a.report:
        run_dirs = list(a.report)
    else:
        threads = max(1, (os.cpu_count() or 1) // a.parallel)
        jobs = [(seed, None) for seed in a.seeds] + ([(seed, a.control) for seed in a.seeds] if a.control else [])
        done = side_by_side(lambda job: train(a.config, job[0], threads, a.sets, out, job[1]), jobs, a.parallel, out)
        run_dirs, controls = done[:len(a.seeds)], done[len(a.seeds):]
    runs = [read_run(Path(d)) for d in run_dirs]
    rows = [per_run(r) for r in runs]
    if controls:
        rows = [against_control(row, Path(run), control) for row, run, control in zip(rows, run_dirs, controls)]
    text = table(rows)
    print(runs_line(r["summary"] for r in runs))
    print(text)
    (out / "learning.json").write_text(json.dumps({"config": a.config, "sets": a.sets, "rows": rows, "runs": runs},
                                                  indent=1))
    plot(runs, out)
    print(f"\nwritten: {out / 'learning.json'}, {out / 'curves.png'}, {out / 'metrics.png'}")


if __name__ == "__main__":
    main()
