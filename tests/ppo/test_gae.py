"""GAE against its definition, computed slowly; token rewards by hand."""

import random

import pytest
import torch

from rlvr.ppo.gae import gae, token_rewards, whiten


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


def test_whitened_advantages_have_zero_mean_unit_std_on_real_tokens():
    mask = torch.tensor([[True, True, False], [True, True, True]])
    a = whiten(torch.tensor([[1.0, 2.0, 50.0], [3.0, 4.0, 5.0]]), mask)
    assert float(a[mask].mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(a[mask].std(correction=0)) == pytest.approx(1.0, abs=1e-5)
    assert a[0, 2] == 0
