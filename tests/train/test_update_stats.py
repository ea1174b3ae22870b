"""The bookkeeping of an update (rlvr.rl.update.policy_update) around its loss: the statistics it logs are the whole
batch's (each one computed over the batch in one piece equals what the step adds up over its micro-batches:
token-weighted means, the largest gap), the all-reduce is asked for on the last micro-batch alone, the loss's
normalisers count what is trained, and a finite gradient norm is not reported."""

import dataclasses

import pytest
import torch

from rlvr.grpo.trainer import Trainer
from rlvr.kl import kl_estimate
from rlvr.optim import build_optimizer
from rlvr.rl.batch import make_batch, micro_batches, outcome_advantages
from rlvr.rl.objective import clip_shares
from rlvr.rl.update import MicroLoss, batch_counts, grpo_loss, policy_update

from .test_step import _batch, tiny_config


def sampled_batch(tmp_path, *settings):
    """(a tiny trainer, a TrainBatch of its own sampling with random rewards): nothing updated yet."""
    trainer = Trainer(tiny_config(tmp_path, *settings))
    algo, scored = trainer.config.algorithm, _batch(trainer)
    return trainer, make_batch(scored, outcome_advantages(scored, algo), policy=trainer.policy, algo=algo,
                               micro_batch_tokens=10_000, temperature=1.0)


def still_optimizer(trainer):
    """The trainer's optimizer and schedule, its step a no-op: an update leaves the weights as they are."""
    optimizer, scheduler = build_optimizer(trainer.policy.model, trainer.config.optim, 10)
    optimizer.step = lambda: None
    return optimizer, scheduler


def _offset(values: torch.Tensor, seed: int, scale: float) -> torch.Tensor:
    return values + scale * torch.randn(values.shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.filterwarnings("ignore:Seems like:UserWarning")
def test_the_statistics_of_a_step_in_micro_batches_are_the_whole_batchs(tmp_path):
    trainer, batch = sampled_batch(tmp_path, "algorithm.beta=0.1", "algorithm.kl_estimator=k2")
    algo, policy = trainer.config.algorithm, trainer.policy
    whole = micro_batches(batch.rollout, batch.loss_mask, 10_000, policy.share_prompt())
    assert len(whole) == 1 and len(micro_batches(batch.rollout, batch.loss_mask, 20, policy.share_prompt())) > 2
    with torch.no_grad():
        now = policy.logprobs(whole[0], 1.0)
    lc = now.logprobs.shape[1]
    # π_old and the sampler's log-probs apart from π_θ's (as after μ > 1 updates, or another engine): clipped tokens
    # on both sides, and a sampler gap whose largest is in the batch's first row (the first micro-batch's)
    old = _offset(now.logprobs, 1, 0.5)
    sampled, ref = _offset(now.logprobs, 2, 0.1), _offset(now.logprobs, 3, 0.3)  # (π_ref: as after a few steps)
    sampled[0, 0] = now.logprobs[0, 0] - 3.0
    untrained = batch.loss_mask.clone()
    untrained[1, -3:], untrained[3] = False, False  # (tokens out of the loss, as a cut row's: no statistic reads them)
    rollout = dataclasses.replace(batch.rollout, sampling_logprobs=sampled)
    batch = dataclasses.replace(batch, scored=dataclasses.replace(batch.scored, rollout=rollout), old_logprobs=old,
                                ref_logprobs=ref, loss_mask=untrained)
    mask = batch.loss_mask[:, :lc]
    n = mask.sum()
    kl = kl_estimate(now.logprobs, ref, algo.kl_estimator, old)
    low, high = clip_shares(algo, now.logprobs, old, batch.advantages[:, :lc], mask)
    assert low > 0 and high > 0 and float((kl * mask).sum()) > 0
    gap = (now.logprobs - sampled).abs() * mask
    num_sequences, num_tokens = batch_counts(batch, policy.world)
    loss, _ = grpo_loss(now.logprobs, old, ref, batch.advantages[:, :lc], mask, algo,
                        num_sequences=num_sequences, num_tokens=num_tokens, constant=12)
    expected = {"loss": float(loss), "kl": float((kl * mask).sum() / n), "clip_low_fraction": low,
                "clip_high_fraction": high, "entropy": float((now.entropy * mask).sum() / n),
                "sampler/logp_abs_diff_mean": float(gap.sum() / n), "sampler/logp_abs_diff_max": 3.0}
    assert float(gap.max()) == pytest.approx(3.0, abs=1e-6)
    optimizer, scheduler = still_optimizer(trainer)
    stats = policy_update(policy, optimizer, scheduler, batch, algo=algo, micro_batch_tokens=20, temperature=1.0,
                          max_grad_norm=0.0, max_new_tokens=12)
    assert {k: stats[k] for k in expected} == pytest.approx(expected, rel=1e-5, abs=1e-7)


@pytest.mark.filterwarnings("ignore:Seems like:UserWarning")
def test_gradients_are_synchronised_on_the_last_micro_batch_alone(tmp_path, monkeypatch):
    """Data-parallel ranks all-reduce their gradients once, in the last micro-batch's backward (Policy.accumulating):
    for an even number of micro-batches as for an odd one."""
    trainer, batch = sampled_batch(tmp_path, "sampling.group_size=3", "sampling.batch_size=9")  # (three groups)
    algo, policy = trainer.config.algorithm, trainer.policy
    share = policy.share_prompt()
    budgets = {len(micro_batches(batch.rollout, batch.loss_mask, b, share)): b for b in range(400, 0, -1)}
    flags: list[bool] = []
    real = policy.accumulating
    monkeypatch.setattr(policy, "accumulating", lambda last: flags.append(last) or real(last))
    optimizer, scheduler = still_optimizer(trainer)
    for count in (min(n for n in budgets if n % 2 == 0 and n > 0), min(n for n in budgets if n % 2 and n > 1)):
        flags.clear()
        policy_update(policy, optimizer, scheduler, batch, algo=algo, micro_batch_tokens=budgets[count],
                      temperature=1.0, max_grad_norm=0.0, max_new_tokens=12)
        assert flags == [False] * (count - 1) + [True], count


@pytest.mark.filterwarnings("ignore:Seems like:UserWarning")
def test_the_losss_normalisers_count_the_trained_sequences_and_tokens_and_are_at_least_one(tmp_path):
    """batch_counts: (completions with a trained token, trained tokens), each at least 1 (a batch with none trains
    nothing; its loss is 0, not 0/0)."""
    trainer, batch = sampled_batch(tmp_path)
    policy = trainer.policy
    lengths = batch.loss_mask.sum(-1)
    assert batch_counts(batch, policy.world) == (int((lengths > 0).sum()), int(lengths.sum()))
    mask = torch.zeros_like(batch.loss_mask)
    counts = {}
    for trained in ([], [(0, 0)], [(0, 0), (0, 1), (1, 0)]):
        mask.zero_()
        for row, token in trained:
            mask[row, token] = True
        counts[len(trained)] = batch_counts(dataclasses.replace(batch, loss_mask=mask), policy.world)
    assert counts == {0: (1, 1), 1: (1, 1), 3: (2, 3)}


def test_a_micro_batchs_share_cannot_be_edited_after_its_backward():
    """The statistics read the MicroLoss the backward used: a record that cannot be changed in between."""
    t = torch.zeros(1, 1)
    part = MicroLoss(t.sum(), None, t, t, t.bool(), t)
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.loss = t.sum() + 1  # type: ignore[misc]


@pytest.mark.filterwarnings("ignore:Seems like:UserWarning")
def test_the_last_of_more_than_256_micro_batches_is_the_one_synchronised(tmp_path, monkeypatch):
    """Python's small ints are shared objects up to 256: the last micro-batch is found by its number's value. (264
    passes: FSDP's equal_counts may add passes to a rank's runs; here it repeats a one-row micro-batch.)"""
    trainer, batch = sampled_batch(tmp_path, "algorithm.beta=0")
    algo, policy = trainer.config.algorithm, trainer.policy
    flags: list[bool] = []
    real = policy.accumulating
    monkeypatch.setattr(policy, "accumulating", lambda last: flags.append(last) or real(last))
    monkeypatch.setattr(policy, "equal_counts", lambda runs: runs[:1] * 264)
    with torch.no_grad():  # (and each pass's log-probs a leaf of the first's values: no model in 264 backwards)
        first = policy.logprobs(micro_batches(batch.rollout, batch.loss_mask, 1, policy.share_prompt())[0], 1.0)
    monkeypatch.setattr(policy, "logprobs", lambda mb, temperature: dataclasses.replace(
        first, logprobs=first.logprobs.clone().requires_grad_()))
    optimizer, scheduler = still_optimizer(trainer)
    policy_update(policy, optimizer, scheduler, batch, algo=algo, micro_batch_tokens=1, temperature=1.0,
                  max_grad_norm=0.0, max_new_tokens=12)
    assert flags == [False] * 263 + [True]


@pytest.mark.filterwarnings("ignore:Seems like:UserWarning")
def test_a_finite_gradient_norm_is_not_said(tmp_path, capsys, monkeypatch):
    import rlvr.rl.update as update

    monkeypatch.setattr(update, "_said", set())  # (said once per process: this process may have said it)
    trainer, batch = sampled_batch(tmp_path)
    algo, policy = trainer.config.algorithm, trainer.policy
    optimizer, scheduler = build_optimizer(policy.model, trainer.config.optim, 10)
    stats = policy_update(policy, optimizer, scheduler, batch, algo=algo, micro_batch_tokens=10_000, temperature=1.0,
                          max_grad_norm=1.0, max_new_tokens=12)
    assert 0 < stats["grad_norm"] < float("inf") and stats["update/skipped"] == 0.0
    assert "gradient norm" not in capsys.readouterr().err
