"""rlvr.losses: the clipped objective's worked numbers, gradient signs, aggregation, and a loop reference."""

import math

import pytest
import torch

from rlvr.losses import (
    aggregate_loss,
    cispo_policy_loss,
    clip_fractions,
    clipped_policy_loss,
    gspo_policy_loss,
    high_entropy_tokens,
    sequence_totals,
)


def test_clipped_objective_worked_numbers():
    old = torch.zeros(1, 1)
    new = torch.tensor([[math.log(1.5)]])
    # objective = min(ρA, clip(ρ)A): 1.2 for A = +1, −1.5 for A = −1; the loss is its negation
    assert clipped_policy_loss(new, old, torch.tensor([1.0])).item() == pytest.approx(-1.2)
    assert clipped_policy_loss(new, old, torch.tensor([-1.0])).item() == pytest.approx(1.5)
    # DeepSeekMath Eq. 3: ρ = 1.1 inside the window gives exactly ρA
    assert clipped_policy_loss(torch.tensor([[math.log(1.1)]]), old, torch.tensor([1.0])).item() == pytest.approx(-1.1)


def test_separate_clip_low_and_high():
    old = torch.zeros(1, 2)
    new = torch.tensor([[math.log(1.25), math.log(0.7)]])
    loss = clipped_policy_loss(new, old, torch.tensor([[1.0, -1.0]]), clip_low=0.2, clip_high=0.28)
    assert loss[0, 0].item() == pytest.approx(-1.25)  # 1.25 < 1.28: not clipped above
    assert loss[0, 1].item() == pytest.approx(0.8)  # 0.7 < 0.8 with A < 0: clipped below


def test_gradient_signs():
    """Positive advantage: descending the loss raises log π; negative lowers it; clipped: no gradient."""
    for adv, expected in ((1.0, -1.0), (-1.0, 1.0)):
        logprobs = torch.zeros(1, 3, requires_grad=True)
        clipped_policy_loss(logprobs, torch.zeros(1, 3), torch.tensor([adv])).sum().backward()
        assert (logprobs.grad.sign() == expected).all()
    logprobs = torch.full((1, 1), math.log(1.5), requires_grad=True)
    clipped_policy_loss(logprobs, torch.zeros(1, 1), torch.tensor([1.0])).sum().backward()
    assert logprobs.grad.item() == 0.0  # ratio above 1 + ε with A > 0: the clip stops the push
    logprobs = torch.full((1, 1), math.log(1.5), requires_grad=True)
    clipped_policy_loss(logprobs, torch.zeros(1, 1), torch.tensor([-1.0])).sum().backward()
    assert logprobs.grad.item() > 0  # A < 0 keeps the unclipped penalty: still pushed down


def test_at_ratio_one_the_gradient_is_reinforce():
    g = torch.Generator().manual_seed(0)
    logprobs = torch.randn(4, 5, generator=g).requires_grad_()
    adv = torch.randn(4, generator=g)
    clipped_policy_loss(logprobs, logprobs.detach(), adv).sum().backward()
    assert torch.allclose(logprobs.grad, -adv[:, None].expand(4, 5))


def test_clip_fractions():
    old = torch.zeros(1, 4)
    new = torch.tensor([[math.log(1.5), math.log(0.5), 0.0, math.log(1.5)]])
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    low, high = clip_fractions(new, old, adv, torch.ones(1, 4, dtype=torch.bool))
    assert (low, high) == (0.25, 0.25)


def test_clip_fractions_count_only_trained_tokens_whose_clip_removed_the_gradient():
    """Below 1 − ε with Â < 0 counts low, above 1 + ε with Â > 0 high; a token past the clip on the side where min()
    keeps its gradient, inside the clip, with Â = 0, or masked, counts in neither; the ratio is π/π_old, not their
    product."""
    old = torch.tensor([[0.3, -0.2, 0.1, 0.5, 0.0, 0.2, -0.1, 0.4, 0.3, 0.1, -0.3]])
    new = old + torch.tensor([[0.5, 0.5, 0.5, 1.5, 1.0, 1.5, 1.5, 1.5, 0.5, 1.1, 0.9]]).log()
    adv = torch.tensor([[-1.0, 1.0, -1.0, 1.0, -1.0, -1.0, 0.0, 1.0, 0.0, 1.0, -1.0]])
    mask = torch.tensor([[True, True, False, True, True, True, True, False, True, True, True]])
    assert clip_fractions(new, old, adv, mask) == pytest.approx((1 / 9, 1 / 9))


def test_a_ratio_exactly_on_the_clip_keeps_its_gradient_and_is_not_counted():
    """clamp passes the gradient at its bounds: a token at π/π_old = 1 ± ε exactly was not silenced."""
    logp = torch.tensor([[-0.5, -1.0]])
    assert clip_fractions(logp, logp, torch.tensor([[1.0, -1.0]]), torch.ones(1, 2, dtype=torch.bool), 0.0, 0.0) == (
        0.0, 0.0)


def test_gspo_clips_a_sequence_ratio_below_one_minus_epsilon_when_its_advantage_is_negative():
    """s = exp(mean log ρ) = 0.5 < 1 − ε with Â = −1: min(s·Â, (1 − ε)·Â) is the clipped (1 − ε)·Â, with no
    gradient."""
    old = torch.zeros(1, 2)
    new = torch.full((1, 2), math.log(0.5), requires_grad=True)
    loss = gspo_policy_loss(new, old, torch.tensor([-1.0]), torch.ones(1, 2, dtype=torch.bool), 0.2, 0.2)
    torch.testing.assert_close(loss, torch.full((1, 2), 0.8))
    loss.sum().backward()
    assert not new.grad.any()


def test_clip_fractions_of_no_trained_token_are_zero():
    logp, nothing = torch.tensor([[-3.0, 0.0]]), torch.zeros(1, 2, dtype=torch.bool)
    assert clip_fractions(logp, torch.zeros(1, 2), torch.tensor([[-1.0, 1.0]]), nothing) == (0.0, 0.0)


def test_cispo_bounds_a_weight_below_one_minus_epsilon_and_keeps_the_gradient():
    """ρ = 0.5 < 1 − ε: the weight is 1 − ε = 0.8, its gradient stopped; the token's log π keeps its own."""
    new = torch.full((1, 1), math.log(0.5), requires_grad=True)
    loss = cispo_policy_loss(new, torch.zeros(1, 1), torch.tensor([1.0]), 0.2, 0.2)
    torch.testing.assert_close(loss, torch.full((1, 1), -0.8 * math.log(0.5)))
    loss.sum().backward()
    torch.testing.assert_close(new.grad, torch.full((1, 1), -0.8))


def test_the_entropy_mask_of_no_trained_token_is_empty():
    h = torch.tensor([[0.5, 2.0]])
    assert not high_entropy_tokens(h, torch.zeros(1, 2, dtype=torch.bool), 0.2).any()


def test_the_default_clip_bounds_a_ratio_below_one_minus_epsilon_at_0_8():
    """ε = 0.2 by default: ρ = 0.5 with Â = −1 is held at 0.8 (the pessimistic min keeps the clipped penalty)."""
    loss = clipped_policy_loss(torch.full((1, 1), 0.5).log(), torch.zeros(1, 1), torch.tensor([-1.0]))
    assert loss.item() == pytest.approx(0.8)


def test_the_token_mean_divides_by_the_trained_tokens_one_of_them_too_and_is_zero_without_any():
    loss = torch.tensor([[3.0, 7.0]])
    assert aggregate_loss(loss, torch.tensor([[True, False]]), "token_mean").item() == 3.0
    assert aggregate_loss(loss, torch.zeros(1, 2, dtype=torch.bool), "token_mean").item() == 0.0
    assert aggregate_loss(loss, torch.zeros(1, 2, dtype=torch.bool), "sequence_mean").item() == 0.0


def test_an_empty_batch_has_empty_sequence_totals():
    assert sequence_totals(torch.zeros(0), torch.zeros(0, dtype=torch.long)).shape == (0,)


def test_gspo_with_a_token_of_log_probability_exactly_zero_is_finite():
    """log π = 0 (a saturated softmax) is a real value: the ratio's straight-through term must not divide by it."""
    new = torch.tensor([[0.0, -0.5]], requires_grad=True)
    loss = gspo_policy_loss(new, torch.tensor([[0.0, -0.5]]), torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool),
                            0.2, 0.2)
    loss.sum().backward()
    assert torch.isfinite(loss).all() and torch.isfinite(new.grad).all()


def test_clip_fractions_above_count_the_positive_advantages_not_the_negative():
    logp = torch.full((1, 3), 1.5).log()
    assert clip_fractions(logp, torch.zeros(1, 3), torch.tensor([[1.0, 1.0, -1.0]]),
                          torch.ones(1, 3, dtype=torch.bool)) == pytest.approx((0.0, 2 / 3))


def test_gspo_with_a_row_of_no_trained_token_gives_a_finite_loss():
    """A row masked out entirely (padding, or a cut trajectory's empty row) has no tokens to average: its ratio
    must not be 0/0, which would reach the aggregated loss through NaN · 0."""
    new = torch.tensor([[-0.2, -0.4], [-0.3, -0.1]], requires_grad=True)
    mask = torch.tensor([[True, True], [False, False]])
    loss = aggregate_loss(gspo_policy_loss(new, new.detach() + 0.1, torch.tensor([1.0, -1.0]), mask, 0.2, 0.2), mask)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(new.grad).all()


def test_clip_fractions_of_one_trained_token():
    logp = torch.full((1, 1), 0.5).log()
    assert clip_fractions(logp, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1, dtype=torch.bool)) == (
        1.0, 0.0)


def test_aggregation_modes_by_hand():
    loss = torch.tensor([[1.0, 2.0, 3.0, 0.0], [4.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]]).bool()
    assert aggregate_loss(loss, mask, "sequence_mean").item() == pytest.approx((2.0 + 4.0) / 2)
    assert aggregate_loss(loss, mask, "token_mean").item() == pytest.approx(10.0 / 4)
    assert aggregate_loss(loss, mask, "constant", constant=4).item() == pytest.approx(10.0 / 8)
    with pytest.raises(ValueError):
        aggregate_loss(loss, mask, "constant")
    with pytest.raises(ValueError, match="positive"):
        aggregate_loss(loss, mask, "constant", constant=-4)
    # a mode read from a config file is equal to the name, not the same object; the counts are keywords
    assert aggregate_loss(loss, mask, mode="".join(["con", "stant"]), constant=4).item() == pytest.approx(10.0 / 8)
    assert aggregate_loss(loss, mask, "".join(["token", "_mean"])).item() == pytest.approx(10.0 / 4)
    assert aggregate_loss(loss, mask, "".join(["sequence", "_mean"])).item() == pytest.approx(3.0)
    with pytest.raises(TypeError):
        aggregate_loss(loss, mask, "token_mean", 5)
    with pytest.raises(ValueError, match="unknown"):
        aggregate_loss(loss, mask, "mean_of_something", constant=4)
    with pytest.raises(ValueError, match="unknown"):  # (a name that sorts after "token_mean")
        aggregate_loss(loss, mask, "zeta")
    with pytest.raises(ValueError, match="positive"):
        aggregate_loss(loss, mask, "constant", constant=0)
    with pytest.raises(ValueError, match="unknown"):  # (a name that sorts before "constant")
        aggregate_loss(loss, mask, "average", constant=4)


def test_fully_masked_rows_do_not_count_as_sequences():
    loss = torch.tensor([[2.0, 2.0], [9.0, 9.0]])
    mask = torch.tensor([[1, 1], [0, 0]]).bool()
    assert aggregate_loss(loss, mask, "sequence_mean").item() == 2.0


@pytest.mark.parametrize("mode", ["sequence_mean", "token_mean", "constant"])
def test_micro_batches_sum_to_the_full_batch(mode):
    g = torch.Generator().manual_seed(0)
    loss = torch.randn(6, 5, generator=g)
    mask = torch.rand(6, 5, generator=g) > 0.3
    mask[:, 0] = True
    full = aggregate_loss(loss, mask, mode, constant=5)
    n_seq, n_tok = int((mask.sum(-1) > 0).sum()), int(mask.sum())
    parts = sum(
        aggregate_loss(loss[i : i + 2], mask[i : i + 2], mode, num_sequences=n_seq, num_tokens=n_tok, constant=5)
        for i in range(0, 6, 2)
    )
    assert parts.item() == pytest.approx(full.item(), abs=1e-6)


def _seed_algorithm_1_loss(new, old, ref, advantages, lengths, eps, beta):
    """DeepSeekMath Algorithm 1's loss, transcribed with Python loops over probabilities."""
    total = 0.0
    for i, (a_i, n_i) in enumerate(zip(advantages, lengths)):
        for t in range(n_i):
            rho = math.exp(new[i][t]) / math.exp(old[i][t])
            surrogate = min(rho * a_i, min(max(rho, 1 - eps), 1 + eps) * a_i)
            r = math.exp(ref[i][t]) / math.exp(new[i][t])
            kl_token = r - math.log(r) - 1
            total += (surrogate - beta * kl_token) / n_i
    return -total / len(advantages)


def test_vectorised_loss_matches_the_seeds_loop():
    g = torch.Generator().manual_seed(3)
    n, t = 5, 7
    new = -torch.rand(n, t, generator=g) * 3
    old = new + torch.randn(n, t, generator=g) * 0.3
    ref = new + torch.randn(n, t, generator=g) * 0.5
    adv = torch.randn(n, generator=g)
    lengths = [7, 3, 5, 1, 6]
    mask = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]
    from rlvr.config import AlgorithmConfig
    from rlvr.rl.update import grpo_loss

    algo = AlgorithmConfig(beta=0.04, clip_low=0.2, clip_high=0.2, kl_estimator="k3", loss_aggregation="sequence_mean")
    loss, _ = grpo_loss(new, old, ref, adv, mask, algo, num_sequences=n, num_tokens=int(mask.sum()), constant=t)
    fast = loss.item()  # (the composed loss the update uses: a flipped sign or a dropped term there fails here)
    slow = _seed_algorithm_1_loss(new.tolist(), old.tolist(), ref.tolist(), adv.tolist(), lengths, 0.2, 0.04)
    assert fast == pytest.approx(slow, abs=1e-5)
