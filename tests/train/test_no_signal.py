"""A step with no reward signal before the first update moves nothing: π_θ is still π_ref and every advantage is
zero, so the exact gradient is zero, and the float noise between the policy's and the reference's forward
passes must not be turned by Adam into a full-size step (what an R1-Zero run that never draws a rewarded
completion would otherwise do)."""

import torch

import rlvr.rl.update as update
from rlvr.grpo.trainer import Trainer

from .test_step import DIGITS, tiny_config


def weights(trainer):
    return {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}


def test_no_signal_before_the_first_update_moves_nothing_then_steps_go_on(tmp_path, monkeypatch):
    real_loss = update.grpo_loss

    def noisy(logprobs, old, ref, *args, **kwargs):  # log π_ref off by float noise, as two forward passes are
        return real_loss(logprobs, old, None if ref is None else ref + 1e-6, *args, **kwargs)
    monkeypatch.setattr(update, "grpo_loss", noisy)
    trainer = Trainer(tiny_config(tmp_path, DIGITS, steps=4))
    real = trainer.advantages
    monkeypatch.setattr(trainer, "advantages", lambda scored: torch.zeros_like(real(scored)))
    for _ in range(2):
        before = weights(trainer)
        metrics = trainer.step().metrics
        assert metrics["update/skipped"] == 1.0 and metrics["grad_norm"] == 0.0 and not trainer.optimizer.state
        assert all(torch.equal(before[n], p) for n, p in weights(trainer).items())
    assert trainer.scheduler.last_epoch == 2  # the schedule still counts the steps
    monkeypatch.setattr(trainer, "advantages", real)  # a reward spread: the first real update
    before = weights(trainer)
    assert trainer.step().metrics["update/skipped"] == 0.0
    assert any(not torch.equal(before[n], p) for n, p in weights(trainer).items())
    monkeypatch.setattr(trainer, "advantages", lambda scored: torch.zeros_like(real(scored)))
    assert trainer.step().metrics["update/skipped"] == 0.0  # π_θ ≠ π_ref now: the KL term's pull is a real one
