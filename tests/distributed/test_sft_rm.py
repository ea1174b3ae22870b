"""SFT and reward-model training on 2 ranks (`--nproc 2`) equal one process: the same loss at every
step and the same weights at the end, with the ranks holding unequal shares and a step with fewer
examples than ranks (the empty rank runs a zero-weighted example to meet the all-reduce)."""

import json
import sys

import pytest
from safetensors.torch import load_file

from rlvr import paths
from rlvr.reward_models.train import RewardModelTrainer
from rlvr.sft.train import SFTTrainer

from ..reward_models.conftest import tiny_rm_config, write_pairs
from ..sft.conftest import echo_rows, tiny_sft_config, write_rows
from .launching import run_ranks


def run(command, data, out, settings, nproc):
    sets = [a for kv in settings for a in ("--set", kv)]
    done = run_ranks([sys.executable, "-m", "rlvr", command, "--model", "tiny", "--data", str(data), *sets,
                           "--output-dir", str(out), "--nproc", str(nproc)], timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return metrics, load_file(paths.latest_checkpoint(out) / "model" / "model.safetensors"), done.stdout


def odd_batch(n):
    """A batch size that leaves one example for the last batch of an epoch (fewer than the 2 ranks)."""
    return next(b for b in range(3, n) if n % b == 1)


@pytest.mark.parametrize("command", ["sft", "rm"])
def test_two_ranks_equal_one_process(tmp_path, command):
    if command == "sft":
        data = write_rows(tmp_path / "echo.jsonl", echo_rows(n=40))
        n = len(SFTTrainer(tiny_sft_config(data, tmp_path / "probe")).data.train)
    else:
        data = write_pairs(tmp_path / "pairs.jsonl", n=40)
        n = len(RewardModelTrainer(tiny_rm_config(data, tmp_path / "probe")).train)
    batch = odd_batch(n)
    steps = -(-n // batch) + 1  # an epoch, its one-example last batch included, and one more step
    settings = [f"batch_size={batch}", f"max_steps={steps}", "optim.lr=1e-3", "eval_fraction=0.25"]
    one, one_weights, _ = run(command, data, tmp_path / "one", [*settings, "threads=1"], nproc=1)
    two, two_weights, stdout = run(command, data, tmp_path / "two", settings, nproc=2)
    assert stdout.count("run directory:") == 1
    assert len(one) == len(two) == steps
    for a, b in zip(one, two):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5), (a["step"], a["loss"], b["loss"])
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
    for name, weight in one_weights.items():
        assert float((two_weights[name] - weight).abs().max()) < 1e-5, name
