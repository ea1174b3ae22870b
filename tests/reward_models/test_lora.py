"""A reward model trained with LoRA: adapters and the new score head learn, the base stays, the run
resumes exactly, and the run directory scores completions as a reward (adapters merged)."""

from pathlib import Path

import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import RewardModelConfig
from rlvr.models.reward_model import build_tiny_reward_model
from rlvr.reward_models.train import train_reward_model
from rlvr.rewards.reward_model import RewardModelScorer
from rlvr.run.directory import resume_config

from .conftest import tiny_rm_config

LORA = {"model": {"name": "tiny", "lora": {"rank": 8}}, "lr": 1e-2, "max_steps": 6, "save_every": 3}


def saved(run):
    return load_file(paths.latest_checkpoint(run) / paths.MODEL / "adapter_model.safetensors")


def test_lora_reward_model_learns_resumes_exactly_and_scores(pairs_file, tmp_path):
    unbroken = train_reward_model(tiny_rm_config(pairs_file, tmp_path / "a", **LORA))
    assert unbroken["after"]["margin"] > unbroken["before"]["margin"]
    weights = saved(tmp_path / "a")
    assert any("score" in n for n in weights) and any("lora_A" in n for n in weights)  # the head travels along

    config = tiny_rm_config(pairs_file, tmp_path / "b", **LORA)
    train_reward_model(config, on_step_end=lambda step, m, flag: flag.request_stop() if step == 3 else None)
    train_reward_model(resume_config(RewardModelConfig, Path(config.output_dir)), resume=True)
    resumed = saved(tmp_path / "b")
    assert weights.keys() == resumed.keys() and all(torch.equal(weights[n], resumed[n]) for n in weights)

    scorer = RewardModelScorer.from_path(tmp_path / "a")  # what `rewards: [{name: reward_model, params: {path}}]` loads
    base = build_tiny_reward_model(0)[0].state_dict()
    merged = scorer.model.state_dict()
    assert not torch.equal(merged["score.weight"], base["score.weight"])
    assert torch.equal(merged["model.embed_tokens.weight"], base["model.embed_tokens.weight"])  # no adapter there
