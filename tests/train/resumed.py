"""The exact-resume check every kind of run shares: unbroken, and stopped after step 1 then resumed, it ends with
the same weights and the same samples."""

import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import TrainConfig
from rlvr.grpo.trainer import train_grpo
from rlvr.run.directory import resume_config

from .test_step import tiny_config


def assert_resumes_exactly(tmp_path, *settings, steps=3):
    train_grpo(tiny_config(tmp_path / "a", *settings, steps=steps))
    train_grpo(tiny_config(tmp_path / "b", *settings, steps=steps),
               on_step_end=lambda step, m, stop: stop.request_stop() if step == 1 else None)
    train_grpo(resume_config(TrainConfig, tmp_path / "b" / "run"), resume=True)
    unbroken, resumed = (load_file(paths.latest_checkpoint(tmp_path / x / "run") / "model" / "model.safetensors")
                         for x in ("a", "b"))
    for name, p in unbroken.items():
        assert torch.equal(p, resumed[name]), name
    samples = [(tmp_path / x / "run" / "samples.jsonl").read_text() for x in ("a", "b")]
    assert samples[0] == samples[1]  # the same draws, the same conversations
