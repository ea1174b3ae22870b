"""The PPO baseline on the tiny model: both networks learn, on GRPO's own rollout and update code."""

from pathlib import Path

import pytest
import torch

from rlvr.ppo.trainer import PPOTrainer

from ..train.test_step import DIGITS, tiny_config


def test_a_ppo_step_updates_policy_and_critic(tmp_path):
    ppo = PPOTrainer(tiny_config(tmp_path, DIGITS, "algorithm.beta=0.04"))
    policy_before = [p.detach().clone() for p in ppo.policy.model.parameters()]
    head_before = ppo.critic.module.head.weight.detach().clone()
    stats = ppo.step().metrics
    assert ppo.step_count == 1 and stats["value_loss"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(policy_before, ppo.policy.model.parameters()))
    assert not torch.equal(head_before, ppo.critic.module.head.weight)


def test_the_critic_fits_the_returns_of_a_fixed_batch(tmp_path):
    ppo = PPOTrainer(tiny_config(tmp_path, DIGITS))
    for group in ppo.critic.optimizer.param_groups:
        group["lr"] = 1e-3
    rollout = ppo.source.take(0)[0].rollout
    returns = (torch.linspace(0, 1, rollout.completion_ids.numel()).view(rollout.completion_ids.shape)
               * rollout.completion_mask)
    losses = []
    for _ in range(30):
        old = ppo.critic.values(rollout)
        losses.append(ppo.critic.update(rollout, old, returns, rollout.completion_mask))
    assert losses[-1] < 0.2 * losses[0]


def test_a_resumed_ppo_run_equals_an_unbroken_one(tmp_path):
    """PPO runs on the run core like every recipe: the critic and its optimizer travel in the checkpoint."""
    from safetensors.torch import load_file

    from rlvr import paths
    from rlvr.config import TrainConfig
    from rlvr.ppo.trainer import train_ppo
    from rlvr.run.checkpoint import load_state
    from rlvr.run.directory import resume_config

    quiet = ["eval_before=false", "eval_after=false", "algorithm.beta=0.04"]
    train_ppo(tiny_config(tmp_path / "a", DIGITS, *quiet, steps=3))
    config = tiny_config(tmp_path / "b", DIGITS, *quiet, steps=3)
    stopped = train_ppo(config, on_step_end=lambda step, m, stop: stop.request_stop() if step == 1 else None)
    assert stopped["stopped_at"] == 1
    train_ppo(resume_config(TrainConfig, tmp_path / "b" / "run"), resume=True)
    runs = [paths.latest_checkpoint(tmp_path / name / "run") for name in ("a", "b")]
    policies = [load_file(run / "model" / "model.safetensors") for run in runs]
    assert all(torch.equal(policies[0][name], policies[1][name]) for name in policies[0])
    critics = [load_state(run)["critic"] for run in runs]
    assert all(torch.equal(critics[0][name], critics[1][name]) for name in critics[0])


def test_a_ppo_run_is_not_resumed_as_grpo(tmp_path):
    from rlvr.config import TrainConfig
    from rlvr.errors import UserError
    from rlvr.grpo.trainer import train_grpo
    from rlvr.ppo.trainer import train_ppo
    from rlvr.run.directory import resume_config

    train_ppo(tiny_config(tmp_path, DIGITS, "eval_before=false", "eval_after=false", steps=1))
    with pytest.raises(UserError, match="this run is PPO"):
        train_grpo(resume_config(TrainConfig, tmp_path / "run", max_steps=2), resume=True)


def test_ppo_with_lora_trains_the_policys_and_the_critics_adapters_only(tmp_path):
    """The critic copies the adapted backbone: its own adapters and its head train, the base of neither."""
    ppo = PPOTrainer(tiny_config(tmp_path, DIGITS, "algorithm.beta=0.04", "model.lora.rank=4"))
    policy = {n: p.detach().clone() for n, p in ppo.policy.model.named_parameters()}
    critic = {n: p.detach().clone() for n, p in ppo.critic.module.named_parameters()}
    ppo.step()
    for model, before in ((ppo.policy.model, policy), (ppo.critic.module, critic)):
        for name, p in model.named_parameters():
            assert p.requires_grad == ("lora_" in name or name.startswith("head.")), name
            if not p.requires_grad:
                assert torch.equal(before[name], p), name  # the base, bitwise
    # what a first step moves: the policy's B and the critic's head (A's gradient is multiplied by B, 0 at
    # first, and the critic's backbone gets its gradient through the head, 0 at first)
    assert all(not torch.equal(policy[n], p) for n, p in ppo.policy.model.named_parameters() if "lora_B" in n)
    assert not torch.equal(critic["head.weight"], ppo.critic.module.head.weight)


def test_ppo_settings_are_recorded_in_the_run_and_a_resume_keeps_them(tmp_path):
    import yaml

    from rlvr.config import TrainConfig
    from rlvr.ppo.trainer import train_ppo
    from rlvr.run.directory import resume_config

    train_ppo(tiny_config(tmp_path, DIGITS, "ppo.lam=0.5", "ppo.critic_lr=3e-5", "eval_before=false",
                          "eval_after=false", steps=1))
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["ppo"] == {"gamma": 1.0, "lam": 0.5, "critic_lr": 3e-5, "value_clip": 0.2,
                            "critic_max_grad_norm": 1.0}
    resumed = PPOTrainer(resume_config(TrainConfig, tmp_path / "run"))
    assert resumed.config.ppo.lam == 0.5 and resumed.critic.optimizer.param_groups[0]["lr"] == 3e-5


def test_a_grpo_run_is_not_resumed_as_ppo(tmp_path):
    from rlvr.config import TrainConfig
    from rlvr.errors import UserError
    from rlvr.grpo.trainer import train_grpo
    from rlvr.ppo.trainer import train_ppo
    from rlvr.run.directory import resume_config

    train_grpo(tiny_config(tmp_path, DIGITS, "eval_before=false", "eval_after=false", steps=1))
    with pytest.raises(UserError, match="this run is GRPO .*rlvr train --resume"):
        train_ppo(resume_config(TrainConfig, tmp_path / "run", max_steps=2), resume=True)


def test_the_critics_gradient_clip_is_the_configured_one(tmp_path):
    """AdamW's step is lr·m/(√v + ε): a gradient clipped to a norm far below ε moves the critic far less than the
    same gradient unclipped (0: no clipping). (The head: the backbone's first gradient is 0, the head being 0.)"""
    moved = {}
    for clip in (0.0, 1e-10):
        ppo = PPOTrainer(tiny_config(tmp_path / str(clip), DIGITS, f"ppo.critic_max_grad_norm={clip}"))
        rollout = ppo.source.take(0)[0].rollout
        head = ppo.critic.module.head.weight
        before = head.detach().clone()
        returns = torch.ones(rollout.completion_ids.shape) * rollout.completion_mask
        ppo.critic.update(rollout, ppo.critic.values(rollout), returns, rollout.completion_mask)
        moved[clip] = float((head.detach() - before).abs().sum())
    assert 0 < moved[1e-10] < 0.01 * moved[0.0]


def test_the_critic_runs_in_the_policys_precision(tmp_path):
    """Its weights stay fp32 and its forward runs under autocast, as the policy's (bf16 here)."""
    ppo = PPOTrainer(tiny_config(tmp_path, DIGITS, "model.dtype=bfloat16"))
    seen = []
    ppo.critic.module.head.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    values = ppo.critic.values(ppo.source.take(0)[0].rollout)
    assert seen and set(seen) == {torch.bfloat16} and values.dtype == torch.float32
    assert ppo.critic.module.head.weight.dtype == torch.float32


def test_ppo_refuses_to_sample_ahead_or_credit_turns_in_one_line(tmp_path):
    from rlvr.errors import UserError

    with pytest.raises(UserError, match="PPO samples each batch with the newest weights.*max_staleness null"):
        PPOTrainer(tiny_config(tmp_path, DIGITS, "sampling.max_staleness=1"))
    agent = Path(__file__).parents[1] / "harness" / "agents.py"
    with pytest.raises(UserError, match="turn_advantages: per_turn is GRPO's"):
        PPOTrainer(tiny_config(tmp_path, DIGITS, "algorithm.turn_advantages=per_turn", "data.template=chat",
                               f"environment.name={agent}:rewards_each_turn"))


def test_a_ppo_steps_advantages_carry_the_kl_to_the_reference_at_the_configured_beta(tmp_path, monkeypatch):
    """What the update trains on, rebuilt by hand from the step's own inputs: every token pays −β·(log π_old −
    log π_ref) with the reference's log-probs, the reward sits on the last token, then GAE and whitening. At β = 0.5
    (not 1, where a mutant that drops β would agree): dropping the KL from the token rewards, or not passing the
    reference's log-probs, changes them."""
    import rlvr.ppo.trainer as module
    from rlvr.ppo.gae import gae, whiten
    from rlvr.rl.batch import batch_logprobs

    ppo = PPOTrainer(tiny_config(tmp_path, DIGITS, "algorithm.beta=0.5", "ppo.gamma=1.0", "ppo.lam=0.9"))
    with torch.no_grad():  # (the policy moves away from its reference, so that the KL is not 0)
        for p in ppo.policy.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    seen = {}
    real_values, real_batch = ppo.critic.values, module.make_batch
    monkeypatch.setattr(ppo.critic, "values", lambda r: seen.setdefault("values", real_values(r)))
    monkeypatch.setattr(module, "make_batch", lambda scored, advantages, **kw: seen.update(
        scored=scored, advantages=advantages) or real_batch(scored, advantages, **kw))
    ppo.step()
    scored = seen["scored"]
    rollout, o, g = scored.rollout, ppo.config.optim, ppo.config.generation
    ref = batch_logprobs(ppo.policy, rollout, o.no_grad_tokens, g.temperature, reference=True)
    mask = rollout.completion_mask & ~scored.rewards.isnan().view(-1)[:, None]
    kl = (rollout.sampling_logprobs - ref) * mask
    assert kl.abs().sum() > 0
    per_token = -0.5 * kl
    last = mask.long().sum(-1) - 1
    for i, reward in enumerate(scored.rewards.view(-1).nan_to_num(0.0).tolist()):
        if last[i] >= 0:
            per_token[i, last[i]] += reward
    expected = whiten(gae(per_token, seen["values"], mask, gamma=1.0, lam=0.9)[0], mask)
    torch.testing.assert_close(seen["advantages"], expected, atol=1e-5, rtol=1e-5)
