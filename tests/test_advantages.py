"""rlvr.advantages: worked numbers from the GRPO literature, properties, and a slow loop reference."""

import math
import random

import pytest
import torch

from rlvr.advantages import (
    batch_normalised,
    decoupled_sum,
    group_advantages,
    group_baseline,
    process_advantages,
    reward_moments,
    reward_std,
    std_from_moments,
    zero_variance_groups,
)


def test_the_explorer_group_worked_example():
    # the explorer's 23 x 17 group (five right of eight): μ = 0.625, σ = 0.484, advantages +0.77 / −1.29
    rewards = torch.tensor([[1.0, 1, 1, 0, 1, 0, 0, 1]])
    assert rewards.mean().item() == pytest.approx(0.625)
    assert reward_std(rewards).item() == pytest.approx(0.484, abs=5e-4)
    adv = group_advantages(rewards)[0]
    assert adv[rewards[0] == 1] == pytest.approx(torch.full((5,), 0.7746), abs=1e-3)
    assert adv[rewards[0] == 0] == pytest.approx(torch.full((3,), -1.291), abs=1e-3)


def test_outcome_supervision_worked_example():
    # outcome supervision (DeepSeekMath §4.1.2): r = (1,1,0,1,0,0,1,0): mean 0.5, std 0.5, advantages ±1.0
    adv = group_advantages(torch.tensor([[1.0, 1, 0, 1, 0, 0, 1, 0]]), eps=0.0)
    assert adv[0].tolist() == [1.0, 1.0, -1.0, 1.0, -1.0, -1.0, 1.0, -1.0]


def test_a_published_example_that_is_not_a_group_normalisation():
    """A GRPO tutorial prints [1.0, 0.0, 0.5, 0.8] -> [0.87, -1.36, -0.16, 0.65] for the code beside it.

    Any (r − b)/s with one b and s per group is an affine function of r, so the slope between
    any two completions must be the same. The printed numbers have slopes 2.23, 2.4, 2.7 and
    1.1: no baseline and scale produce them. We reproduce what the tutorial's *code* computes
    (population std, ε = 1e-8) instead, and check the printed ones are indeed inconsistent.
    """
    rewards = [1.0, 0.0, 0.5, 0.8]
    printed = [0.87, -1.36, -0.16, 0.65]
    slopes = [(printed[i] - printed[j]) / (rewards[i] - rewards[j]) for i in range(4) for j in range(i)]
    assert max(slopes) - min(slopes) > 1.0  # 1.1 between 0.8 and 1.0, 2.51 between 0 and 0.8: not affine

    adv = group_advantages(torch.tensor([rewards]), eps=1e-8)[0]
    mean = sum(rewards) / 4
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 4)
    assert adv.tolist() == pytest.approx([(r - mean) / (std + 1e-8) for r in rewards], abs=1e-6)
    assert [round(a, 2) for a in adv.tolist()] == [1.13, -1.53, -0.2, 0.6]
    # the ordering the seed describes still holds: the best completion gets the largest advantage
    assert adv.argmax().item() == 0 and adv.argmin().item() == 1


@pytest.mark.parametrize("baseline", ["group_mean", "leave_one_out"])
@pytest.mark.parametrize("scale", ["group_std", "batch_std", "none"])
@pytest.mark.parametrize("estimator", ["population", "unbiased"])
def test_advantages_sum_to_zero_per_group(baseline, scale, estimator):
    g = torch.Generator().manual_seed(0)
    rewards = torch.rand(16, 8, generator=g).round()  # binary, some groups all-equal
    adv = group_advantages(rewards, baseline=baseline, scale=scale, std_estimator=estimator)
    assert adv.shape == rewards.shape
    assert adv.sum(-1).abs().max().item() < 1e-5


def test_zero_variance_groups_get_exactly_zero_and_are_counted():
    # 0.1 * 8 is not exactly representable: rounding must not leak (r − μ)/ε noise
    rewards = torch.tensor([[0.1] * 8, [1.0] * 8, [0.0, 1, 0, 1, 0, 1, 0, 1]])
    adv = group_advantages(rewards, eps=1e-12)
    assert adv[:2].abs().max().item() == 0.0
    assert zero_variance_groups(rewards).tolist() == [True, True, False]


def test_better_reward_never_gets_lower_advantage():
    g = torch.Generator().manual_seed(1)
    rewards = torch.rand(32, 6, generator=g)
    for kwargs in ({}, {"baseline": "leave_one_out"}, {"scale": "none"}, {"scale": "batch_std"}):
        adv = group_advantages(rewards, **kwargs)
        order = rewards.argsort(-1)
        assert (adv.gather(-1, order).diff(dim=-1) >= -1e-6).all()


def test_leave_one_out_is_rloo():
    r = torch.tensor([[3.0, 1.0, 2.0]])
    adv = group_advantages(r, baseline="leave_one_out", scale="none")
    assert adv[0].tolist() == pytest.approx([3 - 1.5, 1 - 2.5, 2 - 2.0])
    assert group_baseline(r, "group_mean")[0].tolist() == [2.0, 2.0, 2.0]


def test_unbiased_std_option():
    r = torch.tensor([[1.0, 0.0]])
    assert group_advantages(r, std_estimator="population", eps=0)[0].tolist() == pytest.approx([1.0, -1.0])
    assert (group_advantages(r, std_estimator="unbiased", eps=0)[0].tolist()
            == pytest.approx([0.7071, -0.7071], abs=1e-4))


def test_batch_std_uses_every_reward():
    r = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    adv = group_advantages(r, scale="batch_std", eps=0)
    std_all = torch.tensor([1.0, 0.0, 0.5, 0.5]).std(correction=0).item()
    assert adv[0].tolist() == pytest.approx([0.5 / std_all, -0.5 / std_all])
    assert adv[1].tolist() == [0.0, 0.0]


def _slow_reference(rewards: list[list[float]], eps: float) -> list[list[float]]:
    """The group normalisation of DeepSeekMath §4.1.2 written as loops over plain floats."""
    out = []
    for group in rewards:
        mu = sum(group) / len(group)
        sigma = math.sqrt(sum((r - mu) ** 2 for r in group) / len(group))
        out.append([0.0 if sigma == 0 else (r - mu) / (sigma + eps) for r in group])
    return out


def test_vectorised_matches_slow_loop_reference():
    rng = random.Random(0)
    rewards = [[rng.choice([0.0, 0.1, 0.5, 1.0, 1.1]) for _ in range(8)] for _ in range(50)]
    fast = group_advantages(torch.tensor(rewards, dtype=torch.float64), eps=1e-4)
    slow = _slow_reference(rewards, 1e-4)
    assert fast.flatten().tolist() == pytest.approx([a for row in slow for a in row], abs=1e-9)


def test_bad_inputs_raise():
    for shape in ((8,), (2, 4, 2)):
        with pytest.raises(ValueError, match="rewards must be"):
            group_advantages(torch.zeros(shape))
    for scale in ("whatever", "bogus", "batch"):  # (names after and before "none"; "batch" before "batch_norm")
        with pytest.raises(ValueError, match="unknown advantage scale"):
            group_advantages(torch.tensor([[1.0, 0.0]]), scale=scale)
    for scale in ("batch", "whatever"):  # also with unscored completions ("batch" sorts before "batch_std")
        with pytest.raises(ValueError, match="unknown advantage scale"):
            group_advantages(torch.tensor([[1.0, float("nan"), 0.0]]), scale=scale)
    with pytest.raises(ValueError):
        group_baseline(torch.zeros(2, 1), "leave_one_out")
    for baseline in ("average", "rloo"):  # (names before "group_mean" and after "leave_one_out")
        with pytest.raises(ValueError, match="unknown baseline"):
            group_baseline(torch.zeros(1, 2), baseline)


# ---- process supervision (DeepSeekMath §4.1.3) ----


def test_process_advantages_reproduce_the_return_to_go_worked_example():
    a = process_advantages([[0.5, -0.3, 0.8]], [[10, 20, 30]], 35, normalise=False)[0]
    assert torch.allclose(a[:10], torch.full((10,), 1.0))  # tokens 1-10
    assert torch.allclose(a[10:20], torch.full((10,), 0.5))  # tokens 11-20
    assert torch.allclose(a[20:30], torch.full((10,), 0.8))  # tokens 21-30
    assert torch.equal(a[30:], torch.zeros(5))  # after step 3


def test_process_advantages_equal_a_token_by_token_return_to_go():
    rewards = [[0.2, 0.9], [0.1], [0.7, 0.3, 0.5]]
    ends = [[3, 8], [5], [2, 4, 9]]
    a = process_advantages(rewards, ends, 10)
    flat = torch.tensor([r for rs in rewards for r in rs])
    normalised = ((flat - flat.mean()) / (flat.std(correction=0) + 1e-4)).tolist()
    it = iter(normalised)
    norm = [[next(it) for _ in rs] for rs in rewards]
    for i in range(3):
        for t in range(10):
            expected = sum(r for r, e in zip(norm[i], ends[i]) if e > t)  # steps ending at or after token t+1
            assert float(a[i, t]) == pytest.approx(expected, abs=1e-6)
    assert sum(normalised) == pytest.approx(0.0, abs=1e-5)  # normalised over the group's steps


def test_process_advantages_reject_bad_step_positions():
    with pytest.raises(ValueError, match="not decrease"):
        process_advantages([[1.0, 2.0]], [[6, 5]], 10)
    with pytest.raises(ValueError, match="within 1..10"):
        process_advantages([[1.0]], [[11]], 10)
    for outside in (0, -1):
        with pytest.raises(ValueError, match="within 1..10"):
            process_advantages([[1.0]], [[outside]], 10)
    # two steps ending in the same token: both rewards reach the tokens up to it
    shared = process_advantages([[1.0, 2.0]], [[5, 5]], 6, normalise=False)[0]
    assert shared.tolist() == [3.0] * 5 + [0.0]
    with pytest.raises(ValueError, match="one end position per step"):
        process_advantages([[1.0, 2.0]], [[5]], 10)
    # fewer rewards than ends, in both places (a check of `>` where `!=` is meant passes these)
    with pytest.raises(ValueError, match="one end position per step"):
        process_advantages([[1.0]], [[5, 6]], 10)
    with pytest.raises(ValueError, match="one list per completion"):
        process_advantages([[1.0]], [[5], [6]], 10)
    with pytest.raises(ValueError, match="one list per completion"):  # (and more: a check of `<` passes this)
        process_advantages([[1.0], [2.0]], [[5]], 10)


def test_std_from_moments_where_the_second_moment_is_over_twice_the_squared_mean():
    """[0, 0, 0, 1]: E[r²] = 0.25 ≥ 2·E[r]² = 0.125, where E[r²] mod E[r]² (0) is not E[r²] − E[r]² (0.1875);
    below that ratio the two agree, and the doctest's rewards are below it."""
    r = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    for estimator in ("population", "unbiased"):
        expected = float(reward_std(r, estimator)[0, 0])
        assert std_from_moments(*reward_moments(r), estimator=estimator) == pytest.approx(expected, rel=1e-6)


def test_one_step_reward_normalised_is_zero():
    """A single step reward is its own mean: normalised, it gives no advantage (not its raw value)."""
    assert process_advantages([[0.7]], [[3]], 4).tolist() == [[0.0, 0.0, 0.0, 0.0]]


def test_std_from_moments_of_equal_rewards_is_zero_where_rounding_makes_the_variance_negative():
    """Three rewards of 0.1: Σr²/n − (Σr/n)² is −1.7e-18 in floats. The variance is held at 0 (a floor below
    0 would hand math.sqrt a negative number)."""
    total, total_sq = sum([0.1] * 3), sum([0.1 * 0.1] * 3)
    assert total_sq / 3 - (total / 3) ** 2 < 0
    assert std_from_moments(total, total_sq, 3) == 0.0


@pytest.mark.parametrize("baseline", ["group_mean", "leave_one_out"])
@pytest.mark.parametrize("scale", ["group_std", "none"])
def test_an_unscored_completion_is_left_out_of_its_group(baseline, scale):
    """NaN (unscored) gets advantage 0, and the others get exactly what they would without it, never
    what a reward of 0 would give them."""
    nan = math.nan
    rewards = torch.tensor([[1.0, nan, 0.0, 1.0, 0.5], [nan, nan, 1.0, nan, nan], [0.0, 1.0, 1.0, 0.0, 1.0]])
    adv = group_advantages(rewards, baseline=baseline, scale=scale)
    assert adv[0, 1] == 0 and adv[1].abs().sum() == 0  # one scored completion: nothing to compare with
    without = group_advantages(torch.tensor([[1.0, 0.0, 1.0, 0.5]]), baseline=baseline, scale=scale)[0]
    assert adv[0, [0, 2, 3, 4]].tolist() == without.tolist()
    assert adv[2].tolist() == group_advantages(rewards[2:], baseline=baseline, scale=scale)[0].tolist()
    as_zero = group_advantages(rewards.nan_to_num(0.0), baseline=baseline, scale=scale)
    assert as_zero[0, 1] < 0 and not torch.equal(as_zero[0], adv[0])  # what None used to mean
    assert adv[0].sum().abs() < 1e-5


def test_batch_std_is_over_the_scored_rewards_only():
    rewards = torch.tensor([[1.0, math.nan, 0.0], [1.0, 1.0, 0.0]])
    adv = group_advantages(rewards, scale="batch_std", eps=0.0)
    sigma = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0]).std(correction=0).item()
    assert adv[0].tolist() == pytest.approx([0.5 / sigma, 0.0, -0.5 / sigma])
    assert zero_variance_groups(torch.tensor([[math.nan, math.nan], [1.0, math.nan]])).tolist() == [True, True]


def test_a_group_with_an_unscored_completion_is_uniform_when_its_scored_ones_agree():
    nan = float("nan")
    uniform = zero_variance_groups(torch.tensor([[1.0, 1.0, nan], [-1.0, nan, -1.0], [nan, 0.0, 1.0], [nan, nan, 1.0],
                                                 [nan, nan, nan]]))
    assert uniform.tolist() == [True, True, False, True, True]


def test_leave_one_out_of_two_is_the_other_reward():
    assert group_baseline(torch.tensor([[1.0, 0.0]]), "leave_one_out").tolist() == [[0.0, 1.0]]


@pytest.mark.parametrize("estimator", ["population", "unbiased"])
def test_the_std_from_moments_is_the_std_of_the_rewards(estimator):
    """What ranks holding parts of a batch compute from their summed moments is the whole batch's std."""
    r = torch.tensor([[1.0, 0.0, 0.5], [0.25, float("nan"), 2.0]], dtype=torch.float64)
    want = float(reward_std(r[~r.isnan()].reshape(1, -1), estimator)[0, 0])
    assert std_from_moments(*reward_moments(r), estimator) == pytest.approx(want, rel=1e-12)
    assert math.isnan(std_from_moments(0.0, 0.0, 0.0, estimator))  # (no reward: no std)
    one = std_from_moments(2.0, 4.0, 1.0, estimator)  # (one reward: 0 spread, or no unbiased estimate)
    assert math.isnan(one) if estimator == "unbiased" else one == 0.0


def test_batch_normalised_is_over_the_kept_entries():
    values = torch.tensor([[2.0, 4.0], [9.0, 7.0]], dtype=torch.float64)
    keep = torch.tensor([[True, True], [False, True]])
    kept = torch.tensor([2.0, 4.0, 7.0], dtype=torch.float64)  # (a mean of 13/3: not a whole number)
    want = (kept - kept.mean()) / kept.std(correction=0)
    got = batch_normalised(values, keep, eps=0.0)
    assert got[keep].tolist() == pytest.approx(want.tolist(), rel=1e-12) and got[1, 0] == 0.0
    assert batch_normalised(values, torch.zeros_like(keep), 1e-4).tolist() == [[0.0, 0.0], [0.0, 0.0]]  # (none kept)


def test_reinforce_plus_plus_normalises_the_centred_rewards_over_the_batch():
    """scale batch_norm (REINFORCE++): each reward less its group's mean, then (x − mean) / (std + ε) over the
    batch's completions; a group whose rewards agree keeps 0 (it still counts in the batch's statistics)."""
    r = torch.tensor([[1.0, 0.0, 0.0], [2.0, 2.0, 2.0], [0.5, 1.0, 3.0]], dtype=torch.float64)
    centred = r - r.mean(-1, keepdim=True)
    want = (centred - centred.mean()) / (centred.std(correction=0) + 0.25)
    want[1] = 0.0
    got = group_advantages(r, scale="batch_norm", eps=0.25)
    assert got.tolist() == [pytest.approx(row, rel=1e-12) for row in want.tolist()]


def test_the_batch_std_is_added_to_epsilon():
    r = torch.tensor([[1.0, 0.0], [0.5, 0.25]], dtype=torch.float64)
    want = (r - r.mean(-1, keepdim=True)) / (r.std(correction=0) + 0.5)
    torch.testing.assert_close(group_advantages(r, scale="batch_std", eps=0.5), want)
    unscored = torch.tensor([[1.0, 0.0, float("nan")], [0.5, 0.25, float("nan")]], dtype=torch.float64)
    torch.testing.assert_close(group_advantages(unscored, scale="batch_std", eps=0.5)[:, :2], want)  # (the same ε)


def test_a_reward_component_without_a_weight_weighs_one():
    parts = {"right": torch.tensor([[1.0, 0.0, 0.0]]), "short": torch.tensor([[0.0, 1.0, 1.0]])}
    torch.testing.assert_close(decoupled_sum(parts, {"right": 2.0}, eps=0.0),
                               decoupled_sum(parts, {"right": 2.0, "short": 1.0}, eps=0.0))


def test_settings_read_from_a_file_are_compared_by_value():
    """A config's strings are built at run time (YAML, the command line), not the literals of the code: the
    settings compare by value (a mutant comparing by identity fails here)."""
    def built(text: str) -> str:
        return "".join(list(text))  # (an equal string that is not the interned literal)

    nan = float("nan")
    r = torch.tensor([[1.0, 0.0, 0.5], [0.0, 1.0, nan]])
    for rewards in (r, r[:1]):  # (with an unscored completion, and without)
        for scale in ("batch_std", "group_std", "none", "batch_norm"):
            assert built(scale) is not scale
            torch.testing.assert_close(group_advantages(rewards, scale=built(scale)),
                                       group_advantages(rewards, scale=scale))
    for baseline in ("group_mean", "leave_one_out"):
        torch.testing.assert_close(group_advantages(r, baseline=built(baseline)),
                                   group_advantages(r, baseline=baseline))
    for estimator in ("population", "unbiased"):
        moments = reward_moments(r)
        assert std_from_moments(*moments, built(estimator)) == std_from_moments(*moments, estimator)
        torch.testing.assert_close(reward_std(r[:1], built(estimator)), reward_std(r[:1], estimator))
    with pytest.raises(ValueError, match="unknown std estimator"):
        std_from_moments(*reward_moments(r), "sample")


def test_each_components_advantage_is_multiplied_by_its_weight():
    """GDPO's Σ_k w_k·A_k on a group whose advantages are not ±1 (where w/A and w·A agree): 1 right of 3."""
    right = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
    want = 2.0 * group_advantages(right, scale="group_std", eps=0.0)
    torch.testing.assert_close(decoupled_sum({"right": right}, {"right": 2.0}, eps=0.0), want)
    assert want[0, 0].item() == pytest.approx(2 * (2 / 3) / math.sqrt(2 / 9))


def test_process_supervision_takes_groups_of_hundreds():
    """300 completions, one step each: the lists' lengths agree by value (Python shares only small ints, to 256:
    a mutant comparing the lengths by identity refuses this group)."""
    a = process_advantages([[float(i % 2)] for i in range(300)], [[3]] * 300, 4, normalise=False)
    assert a.shape == (300, 4) and a[1, :3].tolist() == [1.0, 1.0, 1.0] and a[0].abs().sum() == 0
    long = process_advantages([[1.0] * 300], [list(range(1, 301))], 301, normalise=False)  # 300 steps
    assert long[0, 0].item() == 300.0 and long[0, 299].item() == 1.0


def test_the_batch_normalisation_of_one_or_two_values():
    """One value has no spread: 0, also without ε (not 0/0); two are ∓1 around their mean."""
    keep = torch.tensor([[True, False]])
    assert batch_normalised(torch.tensor([[3.0, 7.0]]), keep, eps=0.0).tolist() == [[0.0, 0.0]]
    both = torch.tensor([[True, True]])
    assert batch_normalised(torch.tensor([[1.0, 3.0]]), both, eps=0.0).tolist() == [[-1.0, 1.0]]


def test_equal_values_whose_moments_round_below_zero_normalise_to_zero():
    """Three 1.7s: Σx²/n − mean² is −4.4e-16 in floating point, not 0; the variance is floored at 0 (a square
    root of it would raise). The moments are summed in Python, left to right, as ranks' moments arrive: the same
    rounding on every CPU (a vectorised tensor sum may add in another order)."""
    values = torch.full((1, 3), 1.7, dtype=torch.float64)
    total, total_sq, n = 1.7 + 1.7 + 1.7, 1.7 * 1.7 + 1.7 * 1.7 + 1.7 * 1.7, 3.0
    assert total_sq / n - (total / n) ** 2 < 0  # (the rounding this guards against)
    keep = torch.ones(1, 3, dtype=torch.bool)
    assert batch_normalised(values, keep, 1e-4, (total, total_sq, n)).tolist() == [[0.0, 0.0, 0.0]]
    assert std_from_moments(total, total_sq, n) == 0.0
