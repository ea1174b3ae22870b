"""Every objective, proven against its exact expectation (docs/objectives.md).

On a toy policy small enough to enumerate (tests/objectives/toy.py: 7 completions, groups of 3, fp64), the
gradient of the loss the update composes (outcome_advantages → grpo_loss), in expectation over every group
drawn from π_old, equals the gradient its paper states (tests/objectives/oracles.py) to 1e-10; a Monte-Carlo
mean over sampled groups lies within a 99.9% interval of the exact one; and the peers' formula bugs are
shown to be caught."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rlvr.advantages import process_advantages
from rlvr.config import AlgorithmConfig

from . import oracles
from .harness import Case, exact_gradient, exact_spread, group_loss, monte_carlo, z_999
from .toy import F64, LENGTHS, MASK, PREFIX, SEQUENCES, all_groups, logits

THETA = logits(0)
NEAR = THETA + logits(1, scale=0.6)  # π_old ≠ π_θ: off-policy, far enough that clips bind
REF = logits(2)
HAS_ONE = torch.tensor([float(1 in s) for s in SEQUENCES], dtype=F64)
STOPPED = torch.tensor([float(s[-1] == 0) for s in SEQUENCES], dtype=F64)
TWOS = torch.tensor([float(s.count(2)) for s in SEQUENCES], dtype=F64)  # 0, 1 or 2: a reward of another spread
TOL = 1e-10


def algo(**kw) -> AlgorithmConfig:
    return dataclasses.replace(AlgorithmConfig(beta=0.0), **kw)


def expected_oracle(case: Case, theta, theta_old, per_group) -> torch.Tensor:
    """Σ over every group of P(group) × the stated gradient of that group's loss."""
    groups = all_groups(theta_old, case.g)
    return sum(p * per_group(m) for m, p in zip(groups.members, groups.probability))


def outcome_oracle(case: Case, kind: str, theta, theta_old, adv_of, **kw):
    a = case.algo

    def per_group(members):
        reward = case.reward[members].tolist()
        if case.drop_last:
            reward[-1] = math.nan
        adv = torch.tensor(adv_of(reward, members), dtype=F64)[:, None].expand(-1, MASK.shape[1])
        kept = ~torch.tensor(reward).isnan()
        w = oracles.aggregation_weights(a.loss_aggregation, members, kept, case.constant)
        if a.top_entropy_quantile < 1:
            w = w * entropy_keep(members, theta_old, kept, a.top_entropy_quantile)
        return oracles.policy_gradient(kind, theta, theta_old, members, adv, w, eps_low=a.clip_low,
                                       eps_high=a.clip_high, tau_pos=a.sapo_tau_pos, tau_neg=a.sapo_tau_neg)

    return expected_oracle(case, theta, theta_old, per_group)


def entropy_keep(members, theta_old, kept, share) -> torch.Tensor:
    """The tokens at or above the (1 − ρ) quantile of the group's trained-token entropies (numpy's linear rule)."""
    probs = torch.softmax(theta_old, -1)
    h = -(probs * probs.log()).sum(-1)[PREFIX[members]]
    mask = MASK[members] & kept[:, None]
    values = sorted(h[mask].tolist())
    pos = (1 - share) * (len(values) - 1)
    lo = math.floor(pos)
    q = values[lo] + (values[min(lo + 1, len(values) - 1)] - values[lo]) * (pos - lo)
    return (mask & (h >= q)).to(F64)


def plain(reward, members, **kw):
    return oracles.advantages(reward, **kw)


# ── the advantage estimators and aggregations, on-policy (θ = θ_old), under the clipped objective ──────────
ESTIMATORS = {
    "grpo_sequence_mean": (algo(), {}),
    "grpo_token_mean": (algo(loss_aggregation="token_mean"), {}),
    "dr_grpo_constant": (algo(advantage_scale="none", loss_aggregation="constant"), {"scale": "none"}),
    "grpo_unbiased_std": (algo(std_estimator="unbiased"), {"unbiased": True}),
    "batch_std": (algo(advantage_scale="batch_std"), {"scale": "batch_std"}),
    "rloo": (algo(advantage_baseline="leave_one_out", advantage_scale="none", loss_aggregation="constant"),
             {"baseline": "leave_one_out", "scale": "none"}),
    "reinforce_pp": (algo(advantage_scale="batch_norm"), {"scale": "batch_norm"}),
    "entropy_top_share": (algo(top_entropy_quantile=0.3), {}),
}


@pytest.mark.parametrize("name", ESTIMATORS)
def test_each_estimator_has_the_gradient_it_states(name):
    a, kw = ESTIMATORS[name]
    case = Case(a, HAS_ONE + 0.5 * STOPPED)
    got = exact_gradient(case, THETA, THETA)
    want = outcome_oracle(case, "clip", THETA, THETA, lambda r, m: plain(r, m, eps=a.advantage_eps, **kw))
    assert float(want.abs().max()) > 1e-3  # (a gradient that says something)
    assert torch.allclose(got, want, atol=TOL, rtol=0), (got - want).abs().max()


def test_gdpo_normalises_each_reward_before_the_sum():
    a = algo(reward_aggregation="normalize_then_sum")
    case = Case(a, HAS_ONE + 0.5 * TWOS, {"one": HAS_ONE, "twos": TWOS}, {"one": 1.0, "twos": 0.5})
    got = exact_gradient(case, THETA, THETA)

    def adv(reward, members):
        return oracles.gdpo([HAS_ONE[members].tolist(), TWOS[members].tolist()], [1.0, 0.5], a.advantage_eps)

    want = outcome_oracle(case, "clip", THETA, THETA, adv)
    assert torch.allclose(got, want, atol=TOL, rtol=0)
    summed = outcome_oracle(case, "clip", THETA, THETA, lambda r, m: plain(r, m, eps=a.advantage_eps))
    assert (summed - want).abs().max() > 1e-5  # (GRPO's sum-then-normalise: 1e5 × the tolerance away)


def step_rewards(members):
    """Process supervision on the toy: each token a step, rewarded 1 when it is token 1."""
    return [[float(tok == 1) for tok in SEQUENCES[i]] for i in members.tolist()]


def process_adv(members):
    ends = [list(range(1, len(SEQUENCES[i]) + 1)) for i in members.tolist()]
    return process_advantages(step_rewards(members), ends, MASK.shape[1], dtype=F64)


def test_process_advantages_are_returns_of_normalised_step_rewards():
    """Â_t = Σ_{steps ending at or after t} r̃ (DeepSeekMath §4.1.3)."""
    case = Case(algo(), HAS_ONE, per_token=process_adv)
    got = exact_gradient(case, THETA, THETA)

    def per_group(members):
        flat = [x for row in step_rewards(members) for x in row]
        mean = sum(flat) / len(flat)
        std = math.sqrt(sum((x - mean) ** 2 for x in flat) / len(flat))
        adv = torch.zeros(len(members), MASK.shape[1], dtype=F64)
        for i, row in enumerate(step_rewards(members)):
            normalised = [(x - mean) / (std + 1e-4) for x in row]
            for t in range(len(row)):
                adv[i, t] = sum(normalised[t:])  # the return to go
        w = oracles.aggregation_weights("sequence_mean", members, torch.ones(len(members), dtype=torch.bool), 2.0)
        return oracles.policy_gradient("clip", THETA, THETA, members, adv, w)

    want = expected_oracle(case, THETA, THETA, per_group)
    assert float(want.abs().max()) > 1e-3 and torch.allclose(got, want, atol=TOL, rtol=0)


# ── what the papers claim of the expectation ─────────────────────────────────────────────────────────────
def test_dr_grpo_is_the_policy_gradient_scaled_by_g_minus_1_over_g():
    """Liu et al. 2025: without the std and with a constant normaliser, E[∇] = (G − 1)/G · ∇J / C."""
    case = Case(algo(advantage_scale="none", loss_aggregation="constant"), HAS_ONE)  # (C = the budget, 2 tokens)
    want = -(case.g - 1) / case.g * oracles.expected_reward_gradient(THETA, HAS_ONE) / case.constant
    assert torch.allclose(exact_gradient(case, THETA, THETA), want, atol=TOL, rtol=0)


@pytest.mark.parametrize("drop_last", [False, True])
def test_rloo_is_the_unbiased_policy_gradient_even_with_an_unscored_completion(drop_last):
    """Ahmadian et al. 2024: the leave-one-out baseline gives E[∇] = ∇J / C exactly; with a completion left out
    (its reward failed), the baseline over the scored ones keeps it exact (a peer's bug scaled by the G sampled)."""
    case = Case(algo(advantage_baseline="leave_one_out", advantage_scale="none", loss_aggregation="constant"),
                HAS_ONE, drop_last=drop_last)
    want = -oracles.expected_reward_gradient(THETA, HAS_ONE) / case.constant
    got = exact_gradient(case, THETA, THETA)
    assert torch.allclose(got, want, atol=TOL, rtol=0)
    if drop_last:  # the bug: RLOO as G/(G − 1)·(r_i − mean) with the G sampled, not the G' left: 3/4 of it
        def broken(reward, members):
            kept = [x for x in reward if not math.isnan(x)]
            mean, g = sum(kept) / len(kept), len(reward)
            return [0.0 if math.isnan(x) else g / (g - 1) * (x - mean) for x in reward]
        bad = outcome_oracle(case, "clip", THETA, THETA, broken)
        assert (bad - want).abs().max() > 1e-3


def test_a_group_whose_rewards_are_equal_gives_no_gradient_even_with_no_epsilon():
    """A zero-variance group: exactly 0, never 0/0 (a peer's NaN) nor 0/ε noise."""
    case = Case(algo(advantage_eps=0.0), torch.ones(len(SEQUENCES), dtype=F64))
    got = exact_gradient(case, THETA, THETA)
    assert bool(torch.isfinite(got).all()) and float(got.abs().max()) == 0.0


# ── the policy losses, off-policy (samples from π_old ≠ π_θ) and on-policy ────────────────────────────────
LOSSES = {
    "clip": algo(),
    "clip_higher": algo(clip_high=0.28),
    "gspo": algo(policy_loss="gspo", clip_low=0.05, clip_high=0.05),
    "cispo": algo(policy_loss="cispo", clip_low=1.0, clip_high=0.2, loss_aggregation="token_mean"),
    "sapo": algo(policy_loss="sapo"),
}


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("theta_old", ["on_policy", "off_policy"])
def test_each_policy_loss_has_the_gradient_its_paper_states(name, theta_old):
    a = LOSSES[name]
    old = THETA if theta_old == "on_policy" else NEAR
    case = Case(a, HAS_ONE + 0.5 * STOPPED)
    kind = "clip" if name == "clip_higher" else name
    want = outcome_oracle(case, kind, THETA, old, lambda r, m: plain(r, m, eps=a.advantage_eps))
    got = exact_gradient(case, THETA, old)
    assert float(want.abs().max()) > 1e-3 and torch.allclose(got, want, atol=TOL, rtol=0)
    if theta_old == "on_policy":  # at θ_old every objective is the plain policy gradient Σ c Â ∇log π
        same = outcome_oracle(dataclasses.replace(case, algo=dataclasses.replace(a, policy_loss="clip")), "clip",
                              THETA, THETA, lambda r, m: plain(r, m, eps=a.advantage_eps))
        assert torch.allclose(got, same, atol=TOL, rtol=0)


def test_gspo_averages_the_token_log_ratios_it_does_not_sum_them():
    """A peer summed the log-ratios (the product of the token ratios): another gradient, off by far."""
    a = LOSSES["gspo"]
    case = Case(a, HAS_ONE + 0.5 * STOPPED)
    got = exact_gradient(case, THETA, NEAR)
    lengths = LENGTHS.clone()
    try:  # the oracle with |y| = 1: the sum of the log-ratios
        LENGTHS.fill_(1)
        summed = outcome_oracle(case, "gspo", THETA, NEAR, lambda r, m: plain(r, m, eps=a.advantage_eps))
    finally:
        LENGTHS.copy_(lengths)
    assert (summed - got).abs().max() > 1e-3


# ── the KL term: β·KL with no advantage, constant aggregation C = 1: E[∇] = Σ_p visits(p) ∇KL_p ────────────
def kl_case(estimator: str) -> Case:
    return Case(algo(beta=1.0, kl_estimator=estimator, loss_aggregation="constant", loss_constant=1.0),
                torch.ones(len(SEQUENCES), dtype=F64), g=2)


def visits(theta_old) -> torch.Tensor:
    probs = torch.softmax(theta_old.detach(), -1)
    return torch.stack([torch.tensor(1.0, dtype=F64), probs[0, 1], probs[0, 2]])


def per_prefix(theta_old, grads) -> torch.Tensor:
    return (visits(theta_old)[:, None, None] * grads).sum(0)


@pytest.mark.parametrize("estimator,theta_old,target", [
    ("k1", "on_policy", "zero"),          # log π − log π_ref in a loss pushes nothing, in expectation
    ("k2", "on_policy", "forward"),       # ½(log ratio)²: ∇KL(π_θ‖π_ref)
    ("k3", "on_policy", "reverse"),       # DeepSeekMath's: ∇KL(π_ref‖π_θ), the other direction
    ("k3+", "on_policy", "forward"),      # ρ·k3: ∇KL(π_θ‖π_ref)
    ("k3+", "off_policy", "forward"),     # and off-policy too (the prefixes drawn from π_old)
])
def test_each_kl_estimator_has_the_gradient_it_states(estimator, theta_old, target):
    old = THETA if theta_old == "on_policy" else NEAR
    got = exact_gradient(kl_case(estimator), THETA, old, REF)
    if target == "zero":
        want = torch.zeros_like(THETA)
    else:
        want = per_prefix(old, oracles.kl_gradient(THETA, REF, reverse=target == "reverse"))
    assert torch.allclose(got, want, atol=TOL, rtol=0), (got - want).abs().max()
    forward = per_prefix(old, oracles.kl_gradient(THETA, REF))
    if estimator == "k3":  # the bias a peer shipped: k3's gradient is not KL(π_θ‖π_ref)'s
        assert (got - forward).abs().max() > 1e-2


# ── Monte Carlo: a check of the harness itself (enumeration against sampling) ──────────────────────────
# Sampled groups test the enumeration (all_groups and its probabilities), not rlvr's formulas, which the exact
# tests above prove; two cases, one on-policy estimator and one off-policy clipped loss, are enough for that.
MONTE_CARLO = {
    "grpo-on-policy": (Case(algo(), HAS_ONE + 0.5 * STOPPED), THETA),
    "clip-off-policy": (Case(algo(), HAS_ONE + 0.5 * STOPPED), NEAR),
}


@pytest.mark.parametrize("name", MONTE_CARLO)
def test_sampled_groups_agree_with_the_exact_expectation(name):
    """The mean of n = 2000 groups' gradients is within z·σ/√n of the exact expectation in every coordinate
    (σ: the exact spread of one group's gradient, by enumeration; z: 99.9% two-sided, Bonferroni over the
    coordinates; by the central limit theorem)."""
    case, old = MONTE_CARLO[name]
    exact = exact_gradient(case, THETA, old, REF)
    se = exact_spread(case, THETA, old, REF) / math.sqrt(2000)
    mean = monte_carlo(case, THETA, old, REF, n=2000)
    assert bool(((mean - exact).abs() <= z_999(exact.numel()) * se + 1e-12).all()), ((mean - exact).abs() / se).max()


def test_the_harness_catches_a_changed_formula(monkeypatch):
    """A mutation of the composed loss (β·KL's sign flipped in grpo_loss) fails the KL expectation."""
    import rlvr.rl.update as update

    real = update.kl_estimate
    monkeypatch.setattr(update, "kl_estimate", lambda *a, **k: -real(*a, **k))
    got = exact_gradient(kl_case("k3+"), THETA, THETA, REF)
    want = per_prefix(THETA, oracles.kl_gradient(THETA, REF))
    assert not torch.allclose(got, want, atol=1e-6, rtol=0)
    assert group_loss(kl_case("k3+"), THETA, THETA, REF, torch.tensor([1, 2])) < 0
