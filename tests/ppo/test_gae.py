"""GAE against its definition, computed slowly; token rewards by hand."""

import random

import pytest
import torch

from rlvr.ppo.gae import gae, token_rewards, value_loss, whiten


def slow_gae(rewards, values, length, gamma, lam):
    """A_t = Σ_k (γλ)^k δ_{t+k} with δ_t = r_t + γ V_{t+1} − V_t and V = 0 past the end, one row."""
    v = lambda t: values[t] if t < length else 0.0  # noqa: E731
    deltas = [rewards[t] + gamma * v(t + 1) - v(t) for t in range(length)]
    return [sum((gamma * lam) ** k * deltas[t + k] for k in range(length - t)) for t in range(length)]


@pytest.mark.parametrize("seed", range(5))
def test_gae_equals_the_definition_on_ragged_rows(seed):
    rng = random.Random(seed)
    n, width = 4, 7
    lengths = [rng.randint(1, width) for _ in range(n)]
    mask = torch.tensor([[t < length for t in range(width)] for length in lengths])
    rewards = torch.randn(n, width, generator=torch.Generator().manual_seed(seed)) * mask
    values = torch.randn(n, width, generator=torch.Generator().manual_seed(seed + 100))
    gamma, lam = rng.choice([1.0, 0.99]), rng.choice([0.95, 1.0, 0.0])
    advantages, returns = gae(rewards, values, mask, gamma, lam)
    for i, length in enumerate(lengths):
        expected = slow_gae(rewards[i].tolist(), values[i].tolist(), length, gamma, lam)
        assert advantages[i, :length].tolist() == pytest.approx(expected, abs=1e-5)
        assert advantages[i, length:].abs().sum() == 0 and returns[i, length:].abs().sum() == 0
        assert returns[i, :length].tolist() == pytest.approx(
            (advantages[i, :length] + values[i, :length]).tolist(), abs=1e-5)


def test_gae_over_a_completion_longer_than_python_caches_small_integers():
    """300 tokens: past 256, two equal ints need not be the same object, so an end-of-row test by identity
    (`is not`) would read past the row; GAE still equals its definition."""
    width = 300
    rewards = torch.zeros(1, width)
    rewards[0, -1] = 1.0
    values = torch.linspace(0.0, 1.0, width).unsqueeze(0)
    advantages, _ = gae(rewards, values, torch.ones(1, width, dtype=torch.bool), 0.99, 0.95)
    expected = slow_gae(rewards[0].tolist(), values[0].tolist(), width, 0.99, 0.95)
    assert advantages[0].tolist() == pytest.approx(expected, abs=1e-5)


def test_with_lambda_and_gamma_one_the_return_is_the_reward_to_go_whatever_the_values():
    mask = torch.tensor([[True, True, True]])
    rewards = torch.tensor([[0.1, 0.0, 1.0]])
    _, returns = gae(rewards, torch.tensor([[5.0, -3.0, 2.0]]), mask, gamma=1.0, lam=1.0)
    assert returns.tolist() == [pytest.approx([1.1, 1.0, 1.0])]


def test_token_rewards_put_the_reward_last_and_the_kl_everywhere():
    mask = torch.tensor([[True, True, True], [True, False, False]])
    logprobs = torch.tensor([[-1.0, -2.0, -1.0], [-1.0, 0.0, 0.0]])
    ref = torch.tensor([[-1.5, -2.0, -0.5], [-2.0, 0.0, 0.0]])
    r = token_rewards(torch.tensor([1.0, 0.0]), logprobs, ref, mask, beta=0.1)
    assert r.tolist() == [pytest.approx([-0.05, 0.0, 1.05]), pytest.approx([-0.1, 0.0, 0.0])]


def test_at_beta_zero_the_reference_is_not_read():
    """β = 0 puts no KL in the token rewards, whatever the reference says: a token the reference rules out
    (log-prob −inf) leaves them finite (0 · (−inf) would be NaN)."""
    mask = torch.tensor([[True, True]])
    ref = torch.tensor([[-1.0, -float("inf")]])
    r = token_rewards(torch.tensor([1.0]), torch.tensor([[-1.0, -2.0]]), ref, mask, beta=0.0)
    assert r.tolist() == [[0.0, 1.0]]


def test_the_reward_lands_on_a_one_token_completion_and_nowhere_on_an_empty_one():
    mask = torch.tensor([[True, False], [False, False]])
    r = token_rewards(torch.tensor([1.0, 2.0]), torch.zeros(2, 2), None, mask, beta=0.0)
    assert r.tolist() == [[1.0, 0.0], [0.0, 0.0]]


def test_the_value_clip_holds_below_the_old_value_too():
    """V fell 2 below V_old with clip 0.5: the clipped value is V_old − 0.5, farther from R = −3 than V, so the
    loss is ½·(−0.5 + 3)² (a clip to [0, 0.5] would give ½·3²)."""
    v, old, ret, m = torch.tensor([[-2.0]]), torch.tensor([[0.0]]), torch.tensor([[-3.0]]), torch.tensor([[True]])
    assert value_loss(v, old, ret, m, clip=0.5, tokens=1.0).item() == pytest.approx(0.5 * 2.5**2)


def test_whitened_advantages_have_zero_mean_unit_std_on_real_tokens():
    mask = torch.tensor([[True, True, False], [True, True, True]])
    a = whiten(torch.tensor([[1.0, 2.0, 50.0], [3.0, 4.0, 5.0]]), mask)
    assert float(a[mask].mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(a[mask].std(correction=0)) == pytest.approx(1.0, abs=1e-5)
    assert a[0, 2] == 0


def test_whitening_adds_epsilon_to_the_std():
    """(x − mean) / (std + ε): at ε = 0.5 on [1, 3] (std 1) the advantages are ±1/1.5."""
    a = whiten(torch.tensor([[1.0, 3.0]]), torch.tensor([[True, True]]), eps=0.5)
    assert a[0].tolist() == pytest.approx([-2 / 3, 2 / 3])


def test_the_ppo_steps_advantages_are_token_rewards_then_gae_then_whitening_by_hand():
    """What PPOTrainer.step trains on (ppo_advantages), written out by hand on two completions: rewards 1 and 0,
    log π_old − log π_ref of 0.5 on every token, β = 0.2, γ = 1, λ = 0.5, the critic's values given."""
    from rlvr.ppo.gae import ppo_advantages

    mask = torch.tensor([[True, True, False], [True, True, True]])
    old, ref = torch.zeros(2, 3), torch.full((2, 3), -0.5)
    values = torch.tensor([[0.2, 0.4, 9.0], [0.1, 0.0, -0.3]])
    got, returns = ppo_advantages(torch.tensor([1.0, 0.0]), old, ref, values, mask, beta=0.2, gamma=1.0, lam=0.5)
    # token rewards: −0.2·0.5 = −0.1 each, the sequence reward added on the last real token
    r = [[-0.1, 0.9], [-0.1, -0.1, -0.1]]
    v = [[0.2, 0.4], [0.1, 0.0, -0.3]]
    raw = []
    for rr, vv in zip(r, v):
        deltas = [rr[t] + (vv[t + 1] if t + 1 < len(vv) else 0.0) - vv[t] for t in range(len(rr))]
        row = [0.0] * len(rr)
        for t in reversed(range(len(rr))):
            row[t] = deltas[t] + (0.5 * row[t + 1] if t + 1 < len(rr) else 0.0)
        raw.append(row)
    flat = [x for row in raw for x in row]
    mean = sum(flat) / len(flat)
    std = (sum((x - mean) ** 2 for x in flat) / len(flat)) ** 0.5
    want = [[(x - mean) / (std + 1e-8) for x in row] for row in raw]
    assert got[0, :2].tolist() == pytest.approx(want[0], abs=1e-6)
    assert got[1].tolist() == pytest.approx(want[1], abs=1e-6)
    assert got[0, 2] == 0 and returns[0, 2] == 0  # padding
    assert returns[0, :2].tolist() == pytest.approx([raw[0][t] + v[0][t] for t in range(2)], abs=1e-6)
    assert returns[1].tolist() == pytest.approx([raw[1][t] + v[1][t] for t in range(3)], abs=1e-6)


def test_the_critics_loss_is_clipped_around_its_old_values_by_hand():
    values, old = torch.tensor([[1.0, -1.0, 0.3]]), torch.tensor([[0.0, 0.0, 0.0]])
    returns, mask = torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([[True, True, False]])
    # token 1: V = 1, clipped to 0.2: max((1 − 2)², (0.2 − 2)²) = 3.24; token 2: V = −1, clipped −0.2:
    # max((−1 − 1)², (−0.2 − 1)²) = 4; token 3 masked. ½·(3.24 + 4) / 2 tokens
    assert value_loss(values, old, returns, mask, clip=0.2, tokens=2.0).item() == pytest.approx(0.5 * 7.24 / 2)
