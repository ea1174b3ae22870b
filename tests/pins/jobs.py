"""The behaviour pin of every training loop: per-step metrics and final weights of tiny runs.

    .venv/bin/python -m tests.pins.jobs --out before.json        # run the jobs, write their exact fingerprint
    .venv/bin/python -m tests.pins.jobs --compare before.json after.json     # bit for bit
    .venv/bin/python -m tests.pins.jobs --record                 # tests/pins/recorded.json (see below)

Each job runs through the `rlvr` command (PPO through its API) on the random `tiny` model with one thread and in
fp32 (`model.dtype=float32`: `auto` would pick bf16 on a CPU with AMX), so two runs of the same code on one
machine give identical numbers: a refactor that claims to change nothing must leave every
metric (timings and memory aside) and every weight bit for bit the same (`--out` before and after, `--compare`).
The jobs cover full fine-tuning and LoRA, PPO, SFT and the reward model; the GRPO jobs have a reward that varies
on a random model's samples, β > 0 and two updates per batch, and run synchronously and sampling ahead
(`max_staleness` 0 and 1), so that every stage of the step does work.

tests/pins/test_pins.py runs them in the suite against recorded.json, within the tolerances it explains (another
CPU's kernels sum in another order). Refresh it with `--record` (on any machine) only in a commit that says why
the numbers moved.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).with_name("recorded.json")
RLVR = [sys.executable, "-m", "rlvr"]
DIGITS = (f"rewards=[{{name: '{ROOT / 'tests' / 'train' / 'reward_fns.py'}:digit_share'}}, "
          "{name: boxed_format, weight: 0.1}]")
GRPO = ["--config", str(ROOT / "configs" / "tiny.yaml"), "--set", DIGITS, "--set", "threads=1", "--set",
        "model.dtype=float32", "--set", "algorithm.beta=0.04", "--set", "algorithm.updates_per_batch=2", "--set",
        "sample_every=1", "--max-steps", "4"]
JOBS: dict[str, list[str]] = {
    "grpo": ["train", *GRPO],
    "grpo_variants": ["train", *GRPO, "--set", "algorithm.advantage_scale=batch_std", "--set",
                      "algorithm.ref_refresh_steps=2", "--set", "data.curriculum=true", "--set",
                      "sampling.dynamic_sampling=true", "--set", "optim.schedule=cosine", "--set",
                      "optim.warmup_steps=1", "--set", "sampling.overlap_rewards=false", "--set", "eval_every=2"],
    "lora": ["train", *GRPO, "--set", "model.lora.rank=4", "--set", "optim.lr=1e-2"],
    "ahead0": ["train", *GRPO, "--set", "sampling.max_staleness=0"],
    "ahead1": ["train", *GRPO, "--set", "sampling.max_staleness=1"],
    "sft": ["sft", "--model", "tiny", "--max-steps", "6", "--set", "threads=1", "--set", "model.dtype=float32",
            "--set", "batch_size=8", "--set", "optim.lr=3e-3", "--set", "packing=true", "--set", "max_length=64",
            "--set", "eval_every=3"],
    "rm": ["rm", "--model", "tiny", "--max-steps", "6", "--set", "threads=1", "--set", "model.dtype=float32",
           "--set", "batch_size=8"],
    "ppo": [],
}
# PPO has no command of its own: three steps through its API. Its summary is left out of the
# comparison: before the run core, the PPO trainer wrote none.
PPO = f"""
import sys
from rlvr.config import load_config
from rlvr.ppo.trainer import train_ppo
config = load_config("{ROOT / 'configs' / 'tiny.yaml'}", [{DIGITS!r}, "threads=1", "model.dtype=float32",
                     "algorithm.beta=0.04",
                     f"output_dir={{sys.argv[1]}}", "eval_before=false", "eval_after=false", "sample_every=0"],
                     max_steps=3)
train_ppo(config)
"""
VARIABLE = ("time", "seconds", "memory", "tokens_per_second")  # wall-clock and memory readings differ run to run


def write_data(folder: Path) -> dict[str, Path]:
    rng = random.Random(0)
    word = lambda k: "".join(rng.choice("abcdefghij") for _ in range(k))  # noqa: E731
    sft, pairs = folder / "sft.jsonl", folder / "pairs.jsonl"
    sft.write_text("".join(json.dumps({"prompt": f"echo {w}", "completion": w + "!"}) + "\n"
                           for w in (word(5) for _ in range(40))))
    pairs.write_text("".join(json.dumps({"prompt": f"say {word(3)}", "chosen": word(6) + "!", "rejected": word(6)})
                             + "\n" for _ in range(40)))
    return {"sft": sft, "rm": pairs}


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    """The tensors of the run's last checkpoint's model folder (a LoRA run's: its adapters)."""
    checkpoints = sorted((run_dir / "checkpoints").glob("step-*"))
    tensors: dict[str, torch.Tensor] = {}
    for file in sorted((checkpoints[-1] / "model").glob("*.safetensors")):
        tensors |= load_file(file)
    return tensors


def weights_digest(run_dir: Path) -> str:
    tensors = weights(run_dir)
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def weights_sums(run_dir: Path) -> dict[str, list[float]]:
    """Each tensor's sum and sum of squares (fp64): what the recorded pins compare, within a tolerance."""
    return {name: [float(t.double().sum()), float(t.double().square().sum())]
            for name, t in sorted(weights(run_dir).items())}


def stable_metrics(run_dir: Path) -> list[dict]:
    """Each step's metrics but the clock's and the memory's; a reward's name written relative to the repository."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k.replace(f"{ROOT}/", ""): v for k, v in row.items() if not any(word in k for word in VARIABLE)}
            for row in rows]


def summary_of(run_dir: Path) -> dict:
    # paths (data, checkpoint) name the temporary folder; `machine` names this one's CPU; the tallies of
    # update/skipped and zero_variance_fraction are pinned with the metrics they count
    summary = json.loads((run_dir / "summary.json").read_text())
    return {k: v for k, v in summary.items() if not any(word in k for word in VARIABLE)
            and k not in ("checkpoint", "run_dir", "data", "machine", "skipped_updates", "no_signal_steps")}


def run_jobs(names: list[str]) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = write_data(Path(tmp))
        for name in names:
            run_dir = Path(tmp) / name
            args = [*JOBS[name], "--output-dir", str(run_dir)]
            if name in data:
                args += ["--data", str(data[name])]
            command = [sys.executable, "-c", PPO, str(run_dir)] if name == "ppo" else [*RLVR, *args]
            subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
            summary = {} if name == "ppo" else summary_of(run_dir)
            out[name] = {"metrics": stable_metrics(run_dir), "weights": weights_digest(run_dir),
                         "sums": weights_sums(run_dir), "summary": summary}
            print(f"{name}: {len(out[name]['metrics'])} steps, weights {out[name]['weights'][:16]}", file=sys.stderr)
    return out


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def compare(before: dict, after: dict) -> int:
    failures = 0
    for name in before:
        if name not in after:
            print(f"{name}: missing from the second fingerprint")
            failures += 1
            continue
        for part in ("metrics", "weights", "summary"):  # (the sums follow the weights)
            ok = same(before[name][part], after[name][part])
            failures += not ok
            print(f"{name} {part}: {'identical' if ok else 'DIFFERENT'}")
            if not ok and part == "metrics":
                for step, (x, y) in enumerate(zip(before[name][part], after[name][part]), start=1):
                    for key in sorted(set(x) | set(y)):
                        if not same(x.get(key), y.get(key)):
                            print(f"   step {step} {key}: {x.get(key)!r} -> {y.get(key)!r}")
    return 1 if failures else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the fingerprint of this tree's code here")
    p.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated subset of {','.join(JOBS)}")
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two fingerprint files")
    p.add_argument("--record", action="store_true", help=f"run every job and write {RECORDED.name} (tests/pins)")
    args = p.parse_args()
    if args.record:
        RECORDED.write_text(json.dumps(run_jobs(list(JOBS)), indent=1) + "\n")
        print(f"wrote {RECORDED}")
        return 0
    if args.compare:
        a, b = (json.loads(Path(f).read_text()) for f in args.compare)
        return compare(a, b)
    result = run_jobs(args.jobs.split(","))
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
