"""Rollout correction (rlvr.correction) against hand computations: token and sequence weights, truncated and
masked, and the logged statistics (ratio mean/max, share cut, KL(sampler ‖ trainer), effective sample size)."""

import math

import pytest
import torch

from rlvr.correction import corrected_weights, correction_stats, correction_sums, log_weights

OLD = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -0.3, 0.0]])
SAMPLER = torch.tensor([[-1.5, -1.0, -0.5], [-0.2, -1.0, -7.0]])
MASK = torch.tensor([[True, True, True], [True, True, False]])
E = math.exp


def weights(level, mode, c=2.0):
    return corrected_weights(log_weights(OLD, SAMPLER, MASK, level), MASK, mode, c)


def test_token_level_truncated_and_masked():
    # log-ratios 0.5, −1.0, 0.0 | 0.0, 0.7 (the padding is not a token)
    assert torch.allclose(weights("token", "truncate"), torch.tensor([[E(0.5), E(-1.0), 1.0], [1.0, 2.0, 0.0]]))
    # mask keeps 1/2 <= w <= 2: e^-1 = 0.37 and e^0.7 = 2.01 are dropped, the others keep their weight
    assert torch.allclose(weights("token", "mask"), torch.tensor([[E(0.5), 0.0, 1.0], [1.0, 0.0, 0.0]]))


def test_sequence_level_is_the_product_of_the_token_ratios_on_every_token():
    # row 0: 0.5 − 1.0 + 0 = −0.5; row 1: 0.7
    assert torch.allclose(weights("sequence", "truncate"),
                          torch.tensor([[E(-0.5)] * 3, [2.0, 2.0, 0.0]]))
    assert torch.allclose(weights("sequence", "mask"), torch.tensor([[E(-0.5)] * 3, [0.0, 0.0, 0.0]]))
    assert torch.allclose(weights("sequence", "mask", c=3.0), torch.tensor([[E(-0.5)] * 3, [E(0.7), E(0.7), 0.0]]))


def stats(level, mode):
    sums = correction_sums(OLD, SAMPLER, MASK, level, weights(level, mode))
    return correction_stats(sums, mode)


def test_token_statistics():
    raw = [E(0.5), E(-1.0), 1.0, 1.0, E(0.7)]
    s = stats("token", "truncate")
    assert s["rollout_correction/ratio_mean"] == pytest.approx(sum(raw) / 5)
    assert s["rollout_correction/ratio_max"] == pytest.approx(E(0.7))
    assert s["rollout_correction/corrected_mean"] == pytest.approx((sum(raw) - E(0.7) + 2.0) / 5)
    assert s["rollout_correction/corrected_max"] == pytest.approx(2.0)
    assert s["rollout_correction/share_truncated"] == pytest.approx(1 / 5)
    assert s["rollout_correction/ess"] == pytest.approx(sum(raw) ** 2 / (5 * sum(w * w for w in raw)))
    k3 = sum(E(r) - 1 - r for r in (0.5, -1.0, 0.0, 0.0, 0.7)) / 5  # KL(sampler ‖ trainer), k3 over the tokens
    assert s["sampler/kl"] == pytest.approx(k3)
    assert stats("token", "mask")["rollout_correction/share_masked"] == pytest.approx(2 / 5)


def test_sequence_statistics_count_completions():
    s = stats("sequence", "mask")
    raw = [E(-0.5), E(0.7)]
    assert s["rollout_correction/ratio_mean"] == pytest.approx(sum(raw) / 2)
    assert s["rollout_correction/corrected_mean"] == pytest.approx(E(-0.5) / 2)
    assert s["rollout_correction/share_masked"] == pytest.approx(1 / 2)
    assert s["rollout_correction/ess"] == pytest.approx(sum(raw) ** 2 / (2 * sum(w * w for w in raw)))


def test_a_sampler_that_is_the_trainer_changes_nothing():
    w = corrected_weights(log_weights(OLD, OLD, MASK, "token"), MASK, "mask", 1.5)
    assert torch.equal(w, MASK.float())
    s = correction_stats(correction_sums(OLD, OLD, MASK, "sequence", w), "mask")
    assert s["rollout_correction/ess"] == 1.0 and s["sampler/kl"] == 0.0
    assert s["rollout_correction/share_masked"] == 0.0


def test_a_huge_sequence_ratio_stays_finite():
    old, sampler = torch.zeros(1, 200), torch.full((1, 200), -1.0)  # log w = 200
    w = corrected_weights(log_weights(old, sampler, torch.ones(1, 200, dtype=torch.bool), "sequence"),
                          torch.ones(1, 200, dtype=torch.bool), "truncate", 2.0)
    assert torch.equal(w, torch.full((1, 200), 2.0))
