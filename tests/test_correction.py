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


# ── the edges the mutation run found untested (make mutate, docs/mutation.md) ───────────────────────────────
def test_a_weight_at_the_threshold_is_kept_by_the_mask():
    """Mask mode keeps 1/C ≤ w ≤ C, both bounds included."""
    one = torch.zeros(1, 1)  # log w = 0: w = 1, at both bounds when C = 1
    mask = torch.ones(1, 1, dtype=torch.bool)
    assert corrected_weights(one, mask, "mask", 1.0).item() == 1.0


@pytest.mark.parametrize("name", ["sequence", "token"])
def test_settings_read_from_a_file_are_compared_by_value(name):
    """A level or mode parsed from YAML is a new string object, equal to the literal but not the same object."""
    level = "".join(name)  # (a string built at run time, as yaml.safe_load builds one)
    old, sampled = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -1.0]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    assert log_weights(old, sampled, mask, level).tolist() == log_weights(old, sampled, mask, name).tolist()
    sums = correction_sums(old, sampled, mask, level, corrected_weights(log_weights(old, sampled, mask, name), mask,
                                                                        "truncate", 2.0))
    assert sums["n"] == (1.0 if name == "sequence" else 2.0)
    one = torch.ones(1, 1, dtype=torch.bool)
    assert corrected_weights(torch.tensor([[1.0]]), one, "".join("truncate"), 2.0).item() == 2.0
    assert corrected_weights(torch.tensor([[0.5]]), one, "".join("mask"), 2.0).item() == pytest.approx(E(0.5))


@pytest.mark.parametrize("unknown", ["aaa", "zzz"])  # (before and after every known name, in string order)
def test_an_unknown_level_or_mode_is_refused(unknown):
    mask = torch.ones(1, 1, dtype=torch.bool)
    with pytest.raises(ValueError, match="level"):
        log_weights(torch.zeros(1, 1), torch.zeros(1, 1), mask, unknown)
    with pytest.raises(ValueError, match="mode"):
        corrected_weights(torch.zeros(1, 1), mask, unknown, 2.0)


def test_one_completion_is_the_mean_of_one():
    """At the sequence level one completion is one weight: the means divide by 1."""
    old, sampled, mask = torch.tensor([[-1.0, -1.0]]), torch.tensor([[-1.5, -1.0]]), torch.ones(1, 2, dtype=torch.bool)
    sums = correction_sums(old, sampled, mask, "sequence",
                           corrected_weights(log_weights(old, sampled, mask, "sequence"), mask, "truncate", 2.0))
    stats = correction_stats(sums, "truncate")
    assert sums["n"] == 1.0 and stats["rollout_correction/ratio_mean"] == pytest.approx(E(0.5))
    assert stats["rollout_correction/corrected_mean"] == pytest.approx(E(0.5))


def test_weights_are_capped_at_exp_30_exactly():
    mask = torch.ones(1, 1, dtype=torch.bool)
    for log_w, expected in ((29.5, 29.5), (30.5, 30.0)):
        got = corrected_weights(torch.tensor([[log_w]]), mask, "truncate", float("inf")).item()
        assert got == pytest.approx(math.exp(expected), rel=1e-6)


def test_the_sampler_kl_is_k3_of_the_token_log_ratios():
    """KL(π_s ‖ π_old) by k3 over the sampled tokens: with π_old/π_s = 2 on one token, 2 − 1 − log 2."""
    old, sampled = torch.tensor([[math.log(0.5)]]), torch.tensor([[math.log(0.25)]])
    mask = torch.ones(1, 1, dtype=torch.bool)
    sums = correction_sums(old, sampled, mask, "token", corrected_weights(log_weights(old, sampled, mask, "token"),
                                                                          mask, "truncate", 3.0))
    assert sums["k3"] == pytest.approx(1 - math.log(2.0), rel=1e-6)
    assert correction_stats(sums, "truncate")["sampler/kl"] == pytest.approx(1 - math.log(2.0), rel=1e-6)


def test_the_statistics_of_nothing_and_their_bounds():
    """No token: the maxima are 0 and the effective sample size 1 (nothing to divide); one token counts as one;
    the effective sample size is at most 1 even when rounding would put it above."""
    empty = torch.zeros(1, 1, dtype=torch.bool)
    sums = correction_sums(torch.zeros(1, 1), torch.zeros(1, 1), empty, "token", torch.zeros(1, 1))
    assert sums["w_max"] == 0.0 and sums["kept_max"] == 0.0
    stats = correction_stats(sums, "truncate")
    assert stats["rollout_correction/ess"] == 1.0 and stats["sampler/kl"] == 0.0
    single = {"n": 1.0, "w": 1.0, "w2": 1.0, "w_max": 1.0, "kept": 1.0, "kept_max": 1.0, "changed": 0.0,
              "tokens": 1.0, "k3": 0.5}
    assert correction_stats(single, "mask")["sampler/kl"] == 0.5
    above = {**single, "n": 2.0, "w": 3.0, "w2": 4.0}  # (Σw)² / (n·Σw²) = 9/8: rounding's, not a real weight's
    assert correction_stats(above, "mask")["rollout_correction/ess"] == 1.0


def test_the_share_cut_is_named_by_the_mode_read_from_a_file():
    sums = {"n": 1.0, "w": 1.0, "w2": 1.0, "w_max": 1.0, "kept": 1.0, "kept_max": 1.0, "changed": 0.0,
            "tokens": 1.0, "k3": 0.0}
    assert "rollout_correction/share_truncated" in correction_stats(sums, "".join("truncate"))
    assert "rollout_correction/share_masked" in correction_stats(sums, "mask")


def test_the_effective_sample_size_of_weights_below_one():
    """(Σw)² / (n·Σw²) for w = 0.5 and 0.1: 0.36 / 0.52 (Σw² < 1 is a real case, not an empty one)."""
    sums = {"n": 2.0, "w": 0.6, "w2": 0.26, "w_max": 0.5, "kept": 0.6, "kept_max": 0.5, "changed": 0.0,
            "tokens": 2.0, "k3": 0.0}
    assert correction_stats(sums, "truncate")["rollout_correction/ess"] == pytest.approx(0.36 / 0.52)


def test_a_one_token_completion_carries_its_own_sequence_weight():
    """At the sequence level the completion's weight is read where its tokens are: a one-token completion's
    log-weight stands in its first column only."""
    old, sampled = torch.tensor([[math.log(0.5), 0.0], [-1.0, -1.0]]), torch.tensor([[math.log(0.25), 0.0],
                                                                                      [-1.0, -1.0]])
    mask = torch.tensor([[True, False], [True, True]])
    log_w = log_weights(old, sampled, mask, "sequence")
    sums = correction_sums(old, sampled, mask, "sequence", corrected_weights(log_w, mask, "truncate", 10.0))
    assert sums["n"] == 2.0 and sums["w"] == pytest.approx(2.0 + 1.0) and sums["w_max"] == pytest.approx(2.0)


def test_a_trajectory_split_over_rows_counts_once_at_the_sequence_level():
    """rlvr.harness splits a trajectory over rows (`sequences`): its weight is the product over all its rows, and
    the statistics count it once, by its first row that has tokens; a row without tokens counts for nothing."""
    old = torch.tensor([[0.0, -1.0], [-0.5, 0.0], [0.0, 0.0], [-0.25, 0.0]])
    sampler = torch.tensor([[0.0, -0.5], [-1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    mask = torch.tensor([[False, True], [True, False], [False, False], [True, False]])
    sequences = torch.tensor([0, 0, 1, 2])  # trajectory 0 over rows 0 and 1; trajectory 1 without a token
    log_w = log_weights(old, sampler, mask, "sequence", sequences)
    corrected = corrected_weights(log_w, mask, "truncate", 2.0)
    sums = correction_sums(old, sampler, mask, "sequence", corrected, sequences)
    w = [E(-0.5 + 0.5), E(-0.25)]  # trajectory 0: its two rows' log-ratios summed; trajectory 2
    assert sums["n"] == 2.0 and sums["w"] == pytest.approx(sum(w))
    assert sums["w2"] == pytest.approx(sum(x * x for x in w))
