"""The PPO baseline on the tiny model: both networks learn, on GRPO's own rollout and update code."""

import torch

from rlvr.ppo.trainer import PPOTrainer

from ..train.test_step import DIGITS, tiny_config


def test_a_ppo_step_updates_policy_and_critic(tmp_path):
    ppo = PPOTrainer(tiny_config(tmp_path, DIGITS, "algorithm.beta=0.04"))
    policy_before = [p.detach().clone() for p in ppo.grpo.policy.parameters()]
    head_before = ppo.critic.head.weight.detach().clone()
    stats = ppo.step()
    assert ppo.grpo.step_count == 1 and stats["value_loss"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(policy_before, ppo.grpo.policy.parameters()))
    assert not torch.equal(head_before, ppo.critic.head.weight)


def test_the_critic_fits_the_returns_of_a_fixed_batch(tmp_path):
    ppo = PPOTrainer(tiny_config(tmp_path, DIGITS))
    for group in ppo.critic_optimizer.param_groups:
        group["lr"] = 1e-3
    rollout = ppo.grpo.collect_batch().rollout
    returns = torch.linspace(0, 1, rollout.completion_ids.numel()).view(rollout.completion_ids.shape) * rollout.completion_mask
    losses = []
    for _ in range(30):
        old = ppo.values(rollout)
        losses.append(ppo.update_critic(rollout, old, returns))
    assert losses[-1] < 0.2 * losses[0]
