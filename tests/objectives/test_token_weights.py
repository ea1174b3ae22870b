"""What multiplies each token's policy-gradient term in the step (micro_batch_loss): the rollout correction's
weights and the entropy mask, checked where they meet the loss, on the toy group through the step's own records
(make_batch, micro_batches, batch_counts). A weight computed and logged but not applied fails here."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rlvr.config import AlgorithmConfig, RolloutCorrectionConfig
from rlvr.correction import NO_SUMS
from rlvr.distributed.world import SINGLE
from rlvr.rl.batch import make_batch, micro_batches, outcome_advantages
from rlvr.rl.update import batch_counts, grpo_loss, micro_batch_loss

from .harness import Case, ToyPolicy, scored_group
from .toy import F64, SEQUENCES, T, logits, token_logprobs

THETA, NEAR = logits(0), logits(0) + logits(1, scale=0.6)
MEMBERS = torch.tensor([1, 3, 6])  # (1, 0), (1, 1), (2, 2): lengths 2, 2, 2 with distinct rewards
REWARD = torch.tensor([float(1 in s) + 0.5 * float(s[-1] == 0) for s in SEQUENCES], dtype=F64)


def step_loss(algo: AlgorithmConfig, shift: float = 0.0, correcting: bool = True) -> torch.Tensor:
    """The step's loss of the toy group at θ = NEAR, sampled at θ_old = THETA by a sampler whose log-probs are
    log π_old − `shift` on every token (π_old / π_sampler = e^shift), the correction's statistics collected
    as policy_update collects them when the correction is on."""
    case = Case(algo, REWARD)
    scored = scored_group(case, MEMBERS, THETA)
    rollout = dataclasses.replace(scored.rollout, sampling_logprobs=scored.rollout.sampling_logprobs - shift)
    scored = dataclasses.replace(scored, rollout=rollout)
    advantages = outcome_advantages(scored, algo, SINGLE)
    batch = make_batch(scored, advantages, policy=ToyPolicy(MEMBERS, THETA, None),
                       algo=dataclasses.replace(algo, updates_per_batch=2), micro_batch_tokens=10_000, temperature=1.0)
    logprobs = token_logprobs(NEAR)[MEMBERS]
    sums = dict(NO_SUMS) if correcting else None
    return sum(micro_batch_loss(batch, mb, logprobs, algo, counts=batch_counts(batch, SINGLE), max_new_tokens=T,
                                sums=sums).loss for mb in micro_batches(batch.rollout, batch.loss_mask, 10_000))


def corrected(level: str, mode: str, threshold: float) -> AlgorithmConfig:
    return AlgorithmConfig(beta=0.0, loss_aggregation="token_mean",
                           rollout_correction=RolloutCorrectionConfig(level=level, mode=mode, threshold=threshold))


@pytest.mark.parametrize("threshold, expected", [(3.0, 2.0), (1.5, 1.5)])
def test_token_weights_multiply_the_loss_truncated_at_the_threshold(threshold, expected):
    """π_old / π_sampler = 2 on every token: each token's term is multiplied by min(2, C)."""
    plain = step_loss(corrected("none", "truncate", threshold), correcting=False)
    assert abs(float(plain)) > 1e-3
    got = step_loss(corrected("token", "truncate", threshold), shift=math.log(2.0))
    assert float(got) == pytest.approx(expected * float(plain), rel=1e-12)


def test_masked_tokens_leave_the_loss():
    """w = 2 outside [1/1.5, 1.5]: every token masked, nothing left of the policy-gradient term."""
    assert float(step_loss(corrected("token", "mask", 1.5), shift=math.log(2.0))) == 0.0
    plain = step_loss(corrected("none", "mask", 1.5), correcting=False)
    assert float(step_loss(corrected("token", "mask", 3.0), shift=math.log(2.0))) == pytest.approx(2 * float(plain))


def test_sequence_weights_are_the_completions_whole_ratio():
    """At the sequence level a 2-token completion weighs 2 · 2 = 4 (a product, not a geometric mean)."""
    plain = step_loss(corrected("none", "truncate", 10.0), correcting=False)
    got = step_loss(corrected("sequence", "truncate", 10.0), shift=math.log(2.0))
    assert float(got) == pytest.approx(4 * float(plain), rel=1e-12)
    assert float(step_loss(corrected("sequence", "truncate", 3.0), shift=math.log(2.0))) == pytest.approx(
        3 * float(plain), rel=1e-12)


def test_the_entropy_mask_keeps_the_high_entropy_tokens_only():
    """ρ = 0.5 of the group's 6 tokens: the loss is grpo_loss with the batch's entropy mask as the weights."""
    algo = AlgorithmConfig(beta=0.0, loss_aggregation="token_mean", top_entropy_quantile=0.5)
    case = Case(algo, REWARD)
    scored = scored_group(case, MEMBERS, THETA)
    batch = make_batch(scored, outcome_advantages(scored, algo, SINGLE), policy=ToyPolicy(MEMBERS, THETA, None),
                       algo=dataclasses.replace(algo, updates_per_batch=2), micro_batch_tokens=10_000, temperature=1.0)
    keep = batch.entropy_mask
    assert keep is not None and 0 < int(keep.sum()) < int(batch.loss_mask.sum())
    logprobs, old = token_logprobs(NEAR)[MEMBERS], batch.old_logprobs
    want, _ = grpo_loss(logprobs, old, None, batch.advantages.to(F64), batch.loss_mask, algo, num_sequences=3,
                        num_tokens=int(batch.loss_mask.sum()), constant=T, weights=keep.to(F64))
    got = step_loss(algo, correcting=False)
    unmasked = step_loss(dataclasses.replace(algo, top_entropy_quantile=1.0), correcting=False)
    assert float(got) == pytest.approx(float(want), rel=1e-12) and abs(float(got) - float(unmasked)) > 1e-4


def test_the_steps_correction_statistics_are_the_whole_batchs():
    """What the step accumulates over its micro-batches (from rlvr.correction.NO_SUMS) is correction_sums of the
    whole batch."""
    from rlvr.correction import corrected_weights, correction_sums, log_weights

    algo = corrected("token", "truncate", 1.5)
    case = Case(algo, REWARD)
    scored = scored_group(case, MEMBERS, THETA)
    rollout = dataclasses.replace(scored.rollout, sampling_logprobs=scored.rollout.sampling_logprobs - 0.3)
    scored = dataclasses.replace(scored, rollout=rollout)
    batch = make_batch(scored, outcome_advantages(scored, algo, SINGLE), policy=ToyPolicy(MEMBERS, THETA, None),
                       algo=dataclasses.replace(algo, updates_per_batch=2), micro_batch_tokens=10_000, temperature=1.0)
    sums = dict(NO_SUMS)
    for mb in micro_batches(batch.rollout, batch.loss_mask, 10_000):
        micro_batch_loss(batch, mb, token_logprobs(NEAR)[MEMBERS], algo, counts=batch_counts(batch, SINGLE),
                         max_new_tokens=T, sums=sums)
    old, sampled, mask = batch.old_logprobs, rollout.sampling_logprobs, batch.loss_mask
    direct = correction_sums(old, sampled, mask, "token",
                             corrected_weights(log_weights(old, sampled, mask, "token"), mask, "truncate", 1.5))
    assert sums == pytest.approx(direct)
