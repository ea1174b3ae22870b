"""SFT with LoRA adapters: the base stays bitwise, the adapters learn, and a stopped run resumes exactly."""

from pathlib import Path

import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import SFTConfig
from rlvr.models import build_tiny_model, load_model
from rlvr.run.directory import resume_config
from rlvr.sft.train import train_sft

LORA = {"model": {"name": "tiny", "lora": {"rank": 8}}, "optim": {"lr": 1e-2, "schedule": "cosine"}}


def adapters(run_dir):
    return load_file(paths.latest_checkpoint(run_dir) / paths.MODEL / "adapter_model.safetensors")


def test_lora_sft_learns_in_the_adapters_alone_and_resumes_exactly(make_config):
    unbroken = train_sft(make_config("unbroken", max_steps=6, **LORA))
    assert unbroken["after"]["loss"] < unbroken["before"]["loss"]
    merged, _ = load_model(unbroken["run_dir"])  # base + adapters, as rlvr eval loads the run
    base = build_tiny_model(0)[0]
    changed = {n for n, p in merged.state_dict().items() if not torch.equal(p, base.state_dict()[n])}
    assert changed and all(n.endswith("proj.weight") for n in changed)  # only where adapters sit (linear layers)

    config = make_config("broken", max_steps=6, **LORA)
    train_sft(config, on_step_end=lambda step, metrics, flag: flag.request_stop() if step == 3 else None)
    resumed = train_sft(resume_config(SFTConfig, Path(config.output_dir)), resume=True)
    assert resumed["resumed_from_step"] == 3
    a, b = adapters(Path(unbroken["run_dir"])), adapters(Path(config.output_dir))
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
