"""scripts/gpu_checks.sh, the one run a lent GPU gets, tried on the CPU at a tiny shape so that it has not rotted
when a GPU comes: every check runs and leaves its log, the GRPO step's metrics and the decoding table."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_gpu_checks_run_on_a_cpu_at_a_tiny_shape(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "SHAPE": "tiny", "DEVICE": "cpu", "NEW_TOKENS": "4",
           "STEPS": "2", "BATCHES": "1", "OMP_NUM_THREADS": "1", "WORK": str(tmp_path / "work")}
    done = subprocess.run(["sh", "scripts/gpu_checks.sh", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["generation.txt", "grpo_metrics.jsonl", "grpo_step.txt",
                                                      "machine.txt", "tests_gpu.txt"]
    assert "torch" in (out / "machine.txt").read_text()
    assert "skipped" in (out / "tests_gpu.txt").read_text().splitlines()[-1]  # (no CUDA here)
    rows = [json.loads(line) for line in (out / "grpo_metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(row["memory/peak_gb"] > 0 and row["time/update"] > 0 for row in rows)
    assert "exit 0" in done.stdout.split("2. a bf16 GRPO step")[1].split("\n")[1]
    table = (out / "generation.txt").read_text()
    assert "greedy tokens equal: True" in table and "tokens equal to rlvr's: True" in table
