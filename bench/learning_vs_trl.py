"""Does rlvr learn as well as TRL per step, and how much sooner: the default job run by both, their
checkpoints scored by the same evaluator.

    .venv/bin/python bench/learning_vs_trl.py [--steps 40] [--every 10] [--limit N] [--skip-trl] [--reuse]

The job is `rlvr train` with no arguments (SmolLM2-135M-Instruct, one-digit sums with one example
exchange before each question, 8 prompts x 8 completions at temperature 0.7, <= 64 tokens, the strict
maths verifier + 0.1 x the boxed format, lr 2e-5 constant, AdamW betas (0.9, 0.99), beta 0.04 with k3,
epsilon 0.2, one update per batch). TRL's GRPOTrainer runs it from bench/.venv-trl with the same prompts
(chat messages, the same template), rlvr's own reward functions as its reward functions (weights 1 and
0.1), loss_type "grpo" (DeepSeekMath's per-sequence mean, rlvr's default) and its other defaults
(activation checkpointing among them). Each trainer runs in its own process and saves its weights every
`--every` steps.

Every checkpoint (and the base model, step 0) is scored by `rlvr eval` greedily on the arithmetic task's
held-out split, strict and lenient, with the training prompt and with the question alone. Wall-clock is
the sum of the training steps' seconds (both exclude loading and checkpoint writing).

Prints the table, the time-to-accuracy ratio (TRL's wall-clock to its final strict accuracy over rlvr's
wall-clock to the same accuracy, at checkpoint resolution) and, step by step, rlvr − TRL with a paired
95% interval (Newcombe); writes learning.json and learning.png (accuracy against step and against
wall-clock) to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from grpo_vs_trl import trl_python  # noqa: E402
from machine import job_precision, machine_line  # noqa: E402

MODES = ("strict", "lenient")


def trl_job(steps: int, every: int, out: Path) -> dict:
    """The default TrainConfig as bench/trl_job.py's job, with its prompts written as chat messages."""
    from rlvr.config import TrainConfig
    from rlvr.data import TASKS, load_examples, with_few_shot
    from rlvr.models import resolve_model_path

    c = TrainConfig()
    d, task = c.data, TASKS[c.data.train]
    examples = load_examples(d.train, split="train", prompt_field=d.prompt_field, limit=d.train_size, seed=c.seed,
                             difficulty=d.difficulty)
    data = out / "trl_prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": with_few_shot(e.prompt, list(task.few_shot)),
                                        "answer": e.columns["answer"]}) + "\n" for e in examples))
    g, a, o = c.sampling.group_size, c.algorithm, c.optim
    return {"model": resolve_model_path(c.model.name), "data": str(data), "steps": steps, "group_size": g,
            "prompts_per_step": c.sampling.batch_size // g, "max_new_tokens": c.generation.max_new_tokens,
            "temperature": c.generation.temperature, "lr": o.lr, "beta": a.beta, "seed": c.seed, "threads": c.threads,
            "output_dir": str(out / "trl"), "save_every": every, "rewards": "rlvr", "loss_type": "grpo",
            "epsilon": a.clip_low, "adam_betas": list(o.betas), "max_grad_norm": o.max_grad_norm,
            "scheduler": o.schedule}


def run_rlvr(steps: int, every: int, out: Path, reuse: bool) -> list[tuple[int, float, str]]:
    """(step, training seconds so far, checkpoint) of an `rlvr train` run of the default job."""
    run = out / "rlvr"
    command = [str(Path(sys.executable).parent / "rlvr"), "train", "--output-dir", str(run), "--max-steps", str(steps),
               "--set", f"save_every={every}", "--set", "keep_checkpoints=0", "--set", "eval_before=false",
               "--set", "eval_after=false"]
    if not (reuse and (run / "summary.json").is_file()):
        subprocess.run(command, check=True)
    seconds = [json.loads(line)["step_seconds"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(s, sum(seconds[:s]), str(run / "checkpoints" / f"step-{s:06d}")) for s in range(every, steps + 1, every)]


def run_trl(steps: int, every: int, out: Path, reuse: bool) -> list[tuple[int, float, str]]:
    """(step, training seconds so far, checkpoint) of TRL's run of the same job."""
    job, result = trl_job(steps, every, out), out / "trl_result.json"
    (out / "trl_job.json").write_text(json.dumps(job))
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}  # rlvr's reward functions
    if not (reuse and result.is_file()):
        subprocess.run([str(trl_python(("math-verify", "pyyaml"))), str(HERE / "trl_job.py"),
                        str(out / "trl_job.json"), str(result)], check=True, env=env)
    seconds = json.loads(result.read_text())["step_seconds"]
    return [(s, sum(seconds[:s]), f"{job['output_dir']}/checkpoint-{s}") for s in range(every, steps + 1, every)]


def evaluate(model: str, out: Path, few_shot: bool, limit: int | None) -> dict[str, list[float]]:
    """Greedy verdicts per held-out problem (strict, lenient) of `model` under `rlvr eval`."""
    from rlvr.config import EvalConfig, config_from_dict
    from rlvr.evaluate.runner import run_eval
    from rlvr.evaluate.store import EvalStore

    config = config_from_dict(EvalConfig, {
        "model": model, "data": {"name": "arithmetic", "limit": limit, "few_shot": few_shot}, "samples": 0,
        "generation": {"max_new_tokens": 64}, "output_dir": str(out)})
    run_eval(config, progress=False)
    records = EvalStore(out).read()
    return {mode: [float(r.greedy.correct[mode] or 0.0) for r in records if r.greedy] for mode in MODES}


def time_to(points: list[dict], accuracy: float) -> float | None:
    """Training seconds of the first point at or above `accuracy` (None: never reached)."""
    return next((p["seconds"] for p in points if p["strict"] >= accuracy - 1e-9), None)


def plot(curves: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    for (engine, points), color in zip(curves.items(), ("tab:blue", "tab:orange")):
        for key, ax in (("step", axes[0]), ("seconds", axes[1])):
            x = [p[key] / (60 if key == "seconds" else 1) for p in points]
            ax.plot(x, [100 * p["strict"] for p in points], marker="o", color=color, label=f"{engine}, strict")
            ax.fill_between(x, [100 * p["strict_low"] for p in points], [100 * p["strict_high"] for p in points],
                            color=color, alpha=0.12)
            ax.plot(x, [100 * p["plain_strict"] for p in points], "--", marker=".", color=color,
                    label=f"{engine}, strict, question alone")
    for ax, label in ((axes[0], "step"), (axes[1], "training wall-clock (min)")):
        ax.set_xlabel(label)
        ax.set_ylabel("held-out greedy accuracy, strict (%)")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    figure.suptitle("the default job: rlvr and TRL GRPOTrainer, same prompts, rewards and settings")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--every", type=int, default=10, help="checkpoint and evaluate every N steps")
    p.add_argument("--limit", type=int, help="the first N held-out problems only (default: all)")
    p.add_argument("--skip-trl", action="store_true")
    p.add_argument("--reuse", action="store_true",
                   help="keep a finished training run found in --out (evaluate and report again)")
    p.add_argument("--out", default=str(HERE / "results" / "learning"))
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = {"rlvr": run_rlvr(args.steps, args.every, out, args.reuse)}
    if not args.skip_trl:
        runs["TRL"] = run_trl(args.steps, args.every, out, args.reuse)
    from rlvr.evaluate.accuracy import paired_gain_interval, wilson_interval
    from rlvr.models import resolve_model_path

    def scored(engine: str, step: int, seconds: float, model: str) -> dict:
        shown = evaluate(model, out / "eval" / f"{engine}-{step}", True, args.limit)
        alone = evaluate(model, out / "eval" / f"{engine}-{step}-alone", False, args.limit)
        ci = {m: wilson_interval(int(sum(shown[m])), len(shown[m])) for m in MODES}
        return {"step": step, "seconds": seconds, "verdicts": shown["strict"], "problems": len(shown["strict"]),
                **{m: ci[m].mean for m in MODES},
                **{f"{m}_{e}": getattr(ci[m], e) for m in MODES for e in ("low", "high")},
                "plain_strict": sum(alone["strict"]) / len(alone["strict"]),
                "plain_lenient": sum(alone["lenient"]) / len(alone["lenient"])}

    base = scored("base", 0, 0.0, resolve_model_path("smollm2"))
    curves = {engine: [base] + [scored(engine, *point) for point in points] for engine, points in runs.items()}
    print(f"\nheld-out arithmetic, greedy, {base['problems']} problems; 95% Wilson intervals; "
          "'alone': the question without the example exchange\n")
    print(machine_line(job_precision([], "auto"), "auto") + ("; TRL: float32" if "TRL" in runs else ""))
    print(f"| engine | step | training time | strict | lenient | strict, alone | lenient, alone |\n|{'---|' * 7}")
    for engine, points in curves.items():
        for q in points:
            print(f"| {engine} | {q['step']} | {q['seconds'] / 60:.1f} min | {100 * q['strict']:.1f}% "
                  f"[{100 * q['strict_low']:.1f}, {100 * q['strict_high']:.1f}] | {100 * q['lenient']:.1f}% | "
                  f"{100 * q['plain_strict']:.1f}% | {100 * q['plain_lenient']:.1f}% |")
    result = {"curves": curves, "steps": args.steps, "every": args.every}
    if "TRL" in curves:
        trl, ours = curves["TRL"], curves["rlvr"]
        target = trl[-1]["strict"]
        reached = time_to(ours, target)
        ratio = trl[-1]["seconds"] / reached if reached else None
        print(f"\nTRL's final strict accuracy {100 * target:.1f}% after {trl[-1]['seconds'] / 60:.1f} min of training; "
              + ("rlvr did not reach it" if reached is None else "the base model already has it" if not reached
                 else f"rlvr reached it after {reached / 60:.1f} min: time-to-accuracy ratio {ratio:.2f}x"))
        print("\nstep by step, rlvr − TRL (strict, paired over the same problems, Newcombe 95%):")
        for mine, theirs in zip(ours[1:], trl[1:], strict=True):
            gap = paired_gain_interval(theirs["verdicts"], mine["verdicts"])
            flag = "" if gap.low <= 0 <= gap.high else "  <- beyond the interval"
            print(f"  step {mine['step']:3d}: {100 * gap.mean:+.1f} points "
                  f"[{100 * gap.low:+.1f}, {100 * gap.high:+.1f}]" + flag)
        result.update(target=target, rlvr_seconds_to_target=reached, time_to_accuracy_ratio=ratio)
    (out / "learning.json").write_text(json.dumps(result, indent=2))
    plot(curves, out / "learning.png")
    print(f"\nwritten: {out / 'learning.json'}, {out / 'learning.png'}")


if __name__ == "__main__":
    main()
