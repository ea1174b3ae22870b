"""rlvr.kl: Schulman's k1/k2/k3 on worked numbers and their properties."""

import math

import pytest
import torch

from rlvr.kl import k1, k2, k3, kl_estimate


def lp(p):
    return torch.tensor(p).log()


def test_k3_worked_numbers():
    assert k3(lp([0.6]), lp([0.4])).item() == pytest.approx(0.072, abs=5e-4)
    assert k3(lp([0.9]), lp([0.1])).item() == pytest.approx(1.308, abs=5e-4)
    assert k3(lp([0.5]), lp([0.5])).item() == 0.0


def test_k3_non_negative_and_zero_only_when_equal():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 32, generator=g) * 3 - 2
    b = torch.randn(64, 32, generator=g) * 3 - 2
    assert (k3(a, b) >= 0).all()
    assert (k2(a, b) >= 0).all()
    assert k3(a, a).abs().max().item() == 0.0


def test_k1_and_k2_values():
    assert k1(lp([0.6]), lp([0.4])).item() == pytest.approx(0.4055, abs=1e-4)
    assert k2(lp([0.6]), lp([0.4])).item() == pytest.approx(0.5 * 0.4055**2, abs=1e-4)


def test_estimators_are_unbiased_or_not_as_documented():
    """Monte-Carlo over a small categorical: E[k1] = E[k3] = KL(p‖q), E[k2] ≈ KL for close p, q."""
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.4, 0.4, 0.2])
    true_kl = (p * (p / q).log()).sum().item()
    samples = torch.multinomial(p, 200_000, replacement=True, generator=torch.Generator().manual_seed(0))
    lpp, lpq = p.log()[samples], q.log()[samples]
    assert k1(lpp, lpq).mean().item() == pytest.approx(true_kl, abs=2e-3)
    assert k3(lpp, lpq).mean().item() == pytest.approx(true_kl, abs=2e-3)
    assert k2(lpp, lpq).mean().item() == pytest.approx(true_kl, rel=0.2)


def test_k3_stays_finite_for_extreme_ratios():
    assert torch.isfinite(k3(torch.tensor([0.0]), torch.tensor([-200.0]))).all()
    assert torch.isfinite(k3(torch.tensor([-200.0]), torch.tensor([0.0]))).all()


def test_kl_gradient_pulls_policy_towards_reference():
    logprobs = lp([0.9]).requires_grad_()
    k3(logprobs, lp([0.1])).sum().backward()
    assert logprobs.grad.item() > 0  # minimising KL lowers log π_θ where π_θ > π_ref


def test_dispatch():
    a, b = lp([0.6]), lp([0.4])
    assert kl_estimate(a, b, "k2").item() == k2(a, b).item()
    with pytest.raises(ValueError):
        kl_estimate(a, b, "k4")


def test_the_log_ratio_is_clamped_at_twenty_exactly():
    """k3 and k3+'s ratio read a log-ratio beyond ±20 as ±20 (float32's exp stays finite there): a token 20.5
    nats apart is worth exactly what one 20 apart is, and one 19.5 apart less."""
    at, beyond, within = (torch.tensor([[x]]) for x in (20.0, 20.5, 19.5))
    zero = torch.zeros(1, 1)
    assert k3(zero, beyond).item() == k3(zero, at).item() == pytest.approx(math.exp(20.0) - 21.0, rel=1e-6)
    assert k3(zero, within).item() < k3(zero, at).item()
    assert k3(beyond, zero).item() == pytest.approx(math.exp(-20.0) + 19.0, rel=1e-6)
    ratio_at = kl_estimate(at, zero, "k3+", zero) / k3(at, zero)
    assert (kl_estimate(beyond, zero, "k3+", zero) / k3(beyond, zero)).item() == pytest.approx(ratio_at.item())
    assert (kl_estimate(within, zero, "k3+", zero) / k3(within, zero)).item() < ratio_at.item()
