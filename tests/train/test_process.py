"""Process supervision in GRPO: a process reward model's step scores become per-token advantages."""

import json

import pytest
import torch

from rlvr.advantages import process_advantages
from rlvr.grpo.process import process_batch_advantages, step_end_chars
from rlvr.grpo.trainer import Trainer
from rlvr.optim import build_optimizer
from rlvr.rl.batch import make_batch, outcome_advantages
from rlvr.rl.update import policy_update

from .test_step import DIGITS, _batch, step_with_batch, tiny_config


@pytest.fixture(scope="module")
def prm_dir(tmp_path_factory):
    from rlvr.config import RewardModelConfig, config_from_dict
    from rlvr.reward_models.train import train_reward_model

    tmp = tmp_path_factory.mktemp("prm")
    pairs = tmp / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": f"q{i}", "chosen": f"{i}\n\nok", "rejected": "x"}) + "\n"
                             for i in range(16)))
    train_reward_model(config_from_dict(RewardModelConfig, dict(model="tiny", data=str(pairs), max_steps=2,
                                                                batch_size=8, output_dir=str(tmp / "run"), threads=1)))
    return tmp / "run"


class Steps:
    """A stand-in process reward model: step i of every completion gets probability 0.1 * (i + 1)."""

    def step_probabilities(self, prompts, completions):
        return [[0.1 * (i + 1) for i in range(len(step_end_chars(c, "\n\n")))] for c in completions]


def test_per_token_advantages_follow_the_steps_in_tokens(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, DIGITS))
    scored = _batch(trainer)
    r = scored.rollout
    # give the first completion of each group three steps; the tiny tokenizer is one character per token
    ids = trainer.tokenizer("ab\n\ncd\n\nef").input_ids
    assert len(ids) == 10 and r.completion_ids.shape[1] >= 10
    for row in range(0, len(r.completions), r.group_size):
        r.completions[row] = "ab\n\ncd\n\nef"
        r.completion_ids[row] = 0
        r.completion_ids[row, :10] = torch.tensor(ids)
        r.completion_mask[row] = torch.arange(r.completion_ids.shape[1]) < 10
    advantages = process_batch_advantages(scored, Steps(), trainer.tokenizer, "\n\n")
    assert advantages.shape == r.completion_ids.shape
    g = r.group_size
    for p in range(r.num_prompts):
        rows = range(p * g, (p + 1) * g)
        lengths = [int(r.completion_mask[i].sum()) for i in rows]
        ends = [[2, 6, lengths[0]] if i == p * g else [lengths[i - p * g]] for i in rows]
        rewards = [[0.1, 0.2, 0.3] if i == p * g else [0.1] for i in rows]
        expected = process_advantages(rewards, ends, r.completion_ids.shape[1])
        assert torch.allclose(advantages[p * g:(p + 1) * g], expected)


def test_one_step_per_completion_gives_the_outcome_gradient(tmp_path):
    """Process supervision where each completion is a single step scored with its outcome reward is
    outcome supervision: the per-token returns equal the group-normalised reward on every sampled token."""
    trainer = Trainer(tiny_config(tmp_path, DIGITS))
    scored = _batch(trainer)
    algo = trainer.config.algorithm
    r, g = scored.rollout, scored.rollout.group_size
    lengths = r.lengths.tolist()
    one_step = torch.cat([
        process_advantages([[float(x)] for x in scored.rewards[p]], [[max(1, n)] for n in lengths[p * g:(p + 1) * g]],
                           r.completion_ids.shape[1])
        for p in range(r.num_prompts)
    ])
    grads = []
    for advantages in (outcome_advantages(scored, algo), one_step):
        batch = make_batch(scored, advantages, policy=trainer.policy, algo=algo,
                           micro_batch_tokens=30, temperature=1.0)
        optimizer, scheduler = build_optimizer(trainer.policy.model, trainer.config.optim, 10)
        optimizer.step = lambda: None
        policy_update(trainer.policy, optimizer, scheduler, batch, algo=algo, micro_batch_tokens=30, temperature=1.0,
                      max_grad_norm=0.0, max_new_tokens=12)
        grads.append([p.grad.clone() for p in trainer.policy.model.parameters()])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_training_step_under_process_supervision(tmp_path, prm_dir, monkeypatch):
    from rlvr.rewards.reward_model import ProcessRewardScorer

    trainer = Trainer(tiny_config(tmp_path, DIGITS, f"algorithm.process_reward_model={prm_dir}"))
    metrics, batch = step_with_batch(trainer, monkeypatch)
    assert batch.advantages.shape == batch.rollout.completion_ids.shape
    expected = process_batch_advantages(batch.scored, ProcessRewardScorer(prm_dir), trainer.tokenizer, "\n\n")
    assert torch.allclose(batch.advantages, expected, atol=1e-5)
    assert metrics["grad_norm"] > 0
