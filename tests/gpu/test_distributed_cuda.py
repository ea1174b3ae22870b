"""Training on two GPUs (marker `gpu`; skipped on hosts with fewer than two CUDA devices): NCCL, bf16
autocast (DDP) or FSDP2's bf16 compute with fp32 reduction, checkpoints in parts, and the run resumed
on one GPU."""

import json
import sys

import pytest
import torch

from ..distributed.launching import run_ranks
from ..train.test_step import TINY

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs (one per rank)")]


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_gpus_train_in_bf16_and_the_run_resumes_on_one(tmp_path, strategy):
    run = tmp_path / "run"
    sets = [a for kv in [*TINY, "model.device=cuda", "model.dtype=bfloat16", f"distributed.strategy={strategy}",
                         "algorithm.updates_per_batch=2", "save_every=1", "eval_before=false", "eval_after=false"]
            for a in ("--set", kv)]
    first = run_ranks([sys.executable, "-m", "rlvr", "train", "--nproc", "2", *sets, "--max-steps", "2",
                            "--output-dir", str(run)], timeout=300)
    assert first.returncode == 0, first.stderr[-4000:]
    assert (run / "checkpoints" / "step-000002" / "dcp").is_dir()
    more = run_ranks([sys.executable, "-m", "rlvr", "train", "--resume", str(run), "--max-steps", "3"], timeout=300)
    assert more.returncode == 0, more.stderr[-4000:]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert all(m["grad_norm"] > 0 and m["memory/peak_gb"] > 0 for m in metrics)  # GPU memory on CUDA
