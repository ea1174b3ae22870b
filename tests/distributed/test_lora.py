"""LoRA on 2 ranks (torchrun, gloo): DDP and FSDP2 train the same adapters (the frozen base and the
trained adapters share FSDP units), with the base as the reference, and save the adapters alone, in
parts that a one-process run resumes from."""

import sys

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths

from ..train.test_step import DIGITS, TINY
from .launching import run_ranks

LORA = [*TINY, "model.lora.rank=4", "algorithm.beta=0.04", DIGITS, "eval_before=false", "eval_after=false"]


def train(run, *args, nproc="2"):
    sets = [a for kv in LORA for a in ("--set", kv)]
    out = run_ranks([sys.executable, "-m", "rlvr", "train", "--nproc", nproc, *sets, "--output-dir", str(run),
                     *args], timeout=180)
    assert out.returncode == 0, out.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lora")
    for strategy in ("ddp", "fsdp"):
        train(tmp / strategy, "--max-steps", "1", "--set", f"distributed.strategy={strategy}")
    return tmp


def adapters(run):
    return load_file(paths.latest_checkpoint(run) / paths.MODEL / "adapter_model.safetensors")


def test_ddp_and_fsdp_train_the_same_adapters(runs):
    ddp, fsdp = adapters(runs / "ddp"), adapters(runs / "fsdp")
    assert ddp.keys() == fsdp.keys() and any("lora_B" in name for name in ddp)
    for name, weight in ddp.items():
        assert float((weight - fsdp[name]).abs().max()) < 1e-6, name
    assert any(float(w.abs().max()) > 0 for name, w in ddp.items() if "lora_B" in name)  # B left zero: trained


def test_the_adapters_alone_are_saved_and_one_process_resumes_the_fsdp_run(runs):
    step = paths.latest_checkpoint(runs / "fsdp")
    assert not (step / paths.MODEL / "model.safetensors").exists() and (step / paths.SHARDS).is_dir()
    out = run_ranks([sys.executable, "-m", "rlvr", "train", "--resume", str(runs / "fsdp"), "--max-steps", "2"],
                    timeout=180)
    assert out.returncode == 0, out.stderr[-4000:]
    before, after = adapters(runs / "ddp"), adapters(runs / "fsdp")
    assert paths.latest_checkpoint(runs / "fsdp").name == "step-000002"
    assert any(not torch.equal(before[n], after[n]) for n in before)  # it trained on from the loaded adapters
