"""bench/async.py on the tiny model: every run made, its steps timed, the table against the synchronous run."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_bench_runs_each_staleness_and_tabulates_them(tmp_path):
    tiny = ["model.name=tiny", "data.train_size=16", "data.eval_size=4", "sampling.group_size=2",
            "sampling.batch_size=4", "generation.max_new_tokens=4", "sample_every=0"]
    sets = [a for kv in tiny for a in ("--set", kv)]
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "async.py"), "--jobs", "default", "--default-steps",
                          "3", "--staleness", "1", "--threads", "2", "--out", str(tmp_path), *sets],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads((tmp_path / "async.json").read_text())["rows"]
    assert [r["staleness"] for r in rows] == [None, 1] and all(r["s_per_step"] > 0 for r in rows)
    assert rows[0]["staleness_mean"] == 0 and rows[1]["staleness_mean"] == 2 / 3  # steps 2 and 3 one version late
    assert "| default | 1 |" in out.stdout and "1.00×" in out.stdout and "after" in rows[1]
