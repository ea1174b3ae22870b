"""The memory plan against the measured peak: each setting trained 2 steps in its own process (`rlvr train
--max-steps 2`, no held-out evaluation), its plan line against the largest `memory/peak_gb` it logs.

    .venv/bin/python bench/memory_plan.py [--model smollm2] [--setting="--set optim.micro_batch_tokens=1024" ...]

Prints a table: the setting, the plan, the measured peak (resident set), plan / measured.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from machine import machine_line  # noqa: E402

SETTINGS = ["", "--set optim.micro_batch_tokens=1024", "--set model.lora.rank=16",
            "--set model.gradient_checkpointing=true", "--set sampling.max_staleness=1"]


def measure(model: str, setting: str, out: Path) -> tuple[str, float, float]:
    """(the precision the run said it computed in, its plan, its measured peak) in GB."""
    run = out / re.sub(r"\W+", "_", setting or "defaults")
    done = subprocess.run([sys.executable, "-m", "rlvr", "train", "--set", f"model.name={model}", "--max-steps", "2",
                           "--set", "eval_before=false", "--set", "eval_after=false", "--output-dir", str(run),
                           *shlex.split(setting)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    found = re.search(r"rlvr: memory plan: ([\d.]+) GB", done.stderr)
    said = re.search(r"rlvr: precision ([^(\n]+)", done.stderr)
    if found is None or said is None:
        raise SystemExit(f"no plan or precision line for {setting!r}")
    peaks = [json.loads(line).get("memory/peak_gb", 0.0) for line in (run / "metrics.jsonl").open()]
    return said.group(1).strip(), float(found.group(1)), max(peaks)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--setting", action="append", default=None,
                   help='rlvr train arguments, one setting (--setting="--set KEY=VALUE")')
    args = p.parse_args()
    print(f"{machine_line('each setting its own, as the run said it')}\n\n"
          f"| {args.model}, setting | precision | plan | measured peak | plan / measured |\n|---|---|---|---|---|",
          flush=True)
    with tempfile.TemporaryDirectory() as out:
        for setting in args.setting or SETTINGS:
            dtype, planned, measured = measure(args.model, setting, Path(out))
            print(f"| {setting or 'the defaults'} | {dtype} | {planned:.2f} GB | {measured:.2f} GB | "
                  f"{planned / measured:.2f} |", flush=True)


if __name__ == "__main__":
    main()
