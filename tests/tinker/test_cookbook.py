"""tinker-cookbook's own SL and RL loops (0.6.1), unchanged, against `rlvr serve --tinker` on the tiny model, served
under a Hub name the cookbook knows (scripts/cookbook_offline.py answers its tokenizer and dataset lookups)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.tinker.server import started

ROOT = Path(__file__).resolve().parents[2]
GSM8K = ROOT.parent / "shared" / "data" / "gsm8k" / "train.jsonl"
NAME = "meta-llama/Llama-3.2-1B"  # (a base model in the cookbook's table: the role_colon renderer)


@pytest.fixture
def aliased(tmp_path):
    pytest.importorskip("tinker_cookbook")
    server = started(tmp_path / "root", aliases={NAME: "tiny"})
    yield server.url
    server.shutdown()
    server.close(wait=True)


def run_recipe(recipe, url, tmp_path, *extra):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(GSM8K.read_text().splitlines(keepends=True)[:8]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TINKER_TELEMETRY": "0"}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "cookbook_offline.py"), recipe, "--tokenizer", "tiny",
                           "--data", str(rows), f"base_url={url}", f"model_name={NAME}", "lora_rank=4",
                           f"log_path={tmp_path / recipe}", *extra], capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in (tmp_path / recipe / "metrics.jsonl").read_text().splitlines()]


def test_the_cookbooks_sl_loop_trains_and_saves(aliased, tmp_path):
    metrics = run_recipe("sl", aliased, tmp_path, "batch_size=2", "max_steps=3", "save_every=2")
    assert len(metrics) == 3 and all(m["train_mean_nll"] > 0 and m["grad_norm"] > 0 for m in metrics)
    saved = [json.loads(x) for x in (tmp_path / "sl" / "checkpoints.jsonl").read_text().splitlines()]
    assert [s["name"] for s in saved] == ["000002", "final"] and saved[-1]["sampler_path"].startswith("tinker://")


@pytest.mark.parametrize("loss_fn", ["importance_sampling", "gspo"])
def test_the_cookbooks_rl_loop_samples_scores_and_saves(aliased, tmp_path, loss_fn):
    metrics = run_recipe("rl", aliased, tmp_path, "batch_size=2", "group_size=3", "max_tokens=16",
                         f"loss_fn={loss_fn}", "max_steps=2", "save_every=0")
    assert len(metrics) == 2 and all("reward/total" in m for m in metrics)
    assert (tmp_path / "rl" / "checkpoints.jsonl").read_text().count("final") >= 1
