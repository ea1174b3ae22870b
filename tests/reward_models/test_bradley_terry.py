"""Bradley–Terry loss and pairwise accuracy against values computed by hand."""

import math

import pytest
import torch

from rlvr.reward_models.bradley_terry import bradley_terry_loss, pairwise_accuracy, pairwise_wins


def test_loss_by_hand():
    chosen, rejected = torch.tensor([2.0, 0.0, -1.0]), torch.tensor([1.0, 0.0, 1.0])
    # margins 1, 0, -2: −log σ(1) = log(1 + e^-1), −log σ(0) = log 2, −log σ(−2) = log(1 + e^2)
    expected = (math.log(1 + math.exp(-1)) + math.log(2) + math.log(1 + math.exp(2))) / 3
    assert float(bradley_terry_loss(chosen, rejected)) == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx(1.0444, abs=1e-4)  # (0.3133 + 0.6931 + 2.1269) / 3


def test_loss_depends_only_on_the_margin_and_is_finite_far_out():
    a = bradley_terry_loss(torch.tensor([5.0]), torch.tensor([3.0]))
    b = bradley_terry_loss(torch.tensor([102.0]), torch.tensor([100.0]))
    assert float(a) == pytest.approx(float(b))
    assert float(bradley_terry_loss(torch.tensor([1000.0]), torch.tensor([0.0]))) == 0.0
    assert float(bradley_terry_loss(torch.tensor([0.0]), torch.tensor([1000.0]))) == pytest.approx(1000.0)


def test_loss_gradient_pushes_chosen_up_and_rejected_down():
    chosen, rejected = torch.tensor([0.0], requires_grad=True), torch.tensor([0.0], requires_grad=True)
    bradley_terry_loss(chosen, rejected).backward()
    # d/dr_c −log σ(r_c − r_r) = −(1 − σ(0)) = −0.5
    assert chosen.grad.item() == pytest.approx(-0.5) and rejected.grad.item() == pytest.approx(0.5)


def test_accuracy_counts_ties_as_half():
    chosen, rejected = torch.tensor([3.0, 1.0, 1.0, 0.0]), torch.tensor([2.0, 1.0, 4.0, 0.0])
    assert pairwise_wins(chosen, rejected).tolist() == [1.0, 0.5, 0.0, 0.5]
    assert pairwise_accuracy(chosen, rejected) == 0.5
    assert pairwise_accuracy(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 0.0])) == 1.0
