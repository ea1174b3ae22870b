"""The rlvr loss of one group on the toy policy, composed exactly as the update composes it (the
trainer's outcome_advantages, grpo_loss with its counts, the entropy mask of make_batch), and its
gradient in expectation over every group (exact) or over sampled groups (Monte Carlo)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import torch

from rlvr.config import AlgorithmConfig
from rlvr.losses import high_entropy_tokens
from rlvr.run.world import SINGLE
from rlvr.train.batch import outcome_advantages
from rlvr.train.update import grpo_loss

from .toy import F64, MASK, PREFIX, T, all_groups, sampled_groups, token_logprobs


@dataclasses.dataclass
class Case:
    algo: AlgorithmConfig
    reward: torch.Tensor  # [7] each completion's reward (NaN: unscored)
    components: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # name -> [7]
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    g: int = 3
    constant: float = 2.0
    drop_last: bool = False  # the last completion of every group unscored (a reward that failed)
    per_token: object = None  # fn(members) -> [G, T] advantages (process supervision), else outcome's


def group_loss(case: Case, theta, theta_old, theta_ref, members: torch.Tensor) -> torch.Tensor:
    reward = case.reward[members].clone()
    if case.drop_last:
        reward[-1] = float("nan")
    if case.per_token is not None:
        adv = case.per_token(members)
    else:
        rollout = SimpleNamespace(completion_ids=torch.zeros(len(members), T))
        scored = SimpleNamespace(rewards=reward[None], rollout=rollout,
                                 reward_components={k: v[members][None] for k, v in case.components.items()})
        adv = outcome_advantages(scored, case.algo, SINGLE, case.weights)
    mask = MASK[members] & ~reward.isnan()[:, None]
    logprobs = token_logprobs(theta)[members]
    old = token_logprobs(theta_old).detach()[members]
    ref = token_logprobs(theta_ref).detach()[members] if case.algo.beta > 0 else None
    keep = None
    if case.algo.top_entropy_quantile < 1:  # (make_batch's: entropies under π_old, the group the batch)
        probs = torch.softmax(theta_old.detach(), -1)
        entropy = -(probs * probs.log()).sum(-1)[PREFIX[members]]
        keep = high_entropy_tokens(entropy, mask, case.algo.top_entropy_quantile).to(F64)
    loss, _ = grpo_loss(logprobs, old, ref, adv.to(F64), mask, case.algo,
                        num_sequences=max(1, int((mask.sum(-1) > 0).sum())), num_tokens=max(1, int(mask.sum())),
                        constant=case.constant, weights=keep)
    return loss


def exact_gradient(case: Case, theta, theta_old, theta_ref=None) -> torch.Tensor:
    """E over every group drawn from π_old of ∇_θ (the group's loss), exactly (fp64)."""
    t = theta.detach().clone().requires_grad_(True)
    groups = all_groups(theta_old, case.g)
    total = sum(p * group_loss(case, t, theta_old, theta_ref, m) for m, p in zip(groups.members, groups.probability))
    (grad,) = torch.autograd.grad(total, t)
    return grad


def exact_spread(case: Case, theta, theta_old, theta_ref=None) -> torch.Tensor:
    """The standard deviation of one group's gradient over every group drawn from π_old, exactly [3, 3]."""
    groups = all_groups(theta_old, case.g)
    grads = []
    for members in groups.members:
        t = theta.detach().clone().requires_grad_(True)
        grads.append(torch.autograd.grad(group_loss(case, t, theta_old, theta_ref, members), t)[0])
    stacked, p = torch.stack(grads), groups.probability[:, None, None]
    mean = (p * stacked).sum(0)
    return ((p * (stacked - mean) ** 2).sum(0)).sqrt()


def monte_carlo(case: Case, theta, theta_old, theta_ref=None, *, n: int = 2000, seed: int = 0) -> torch.Tensor:
    """∇ of the mean loss over `n` groups sampled from π_old."""
    t = theta.detach().clone().requires_grad_(True)
    draws = sampled_groups(theta_old, case.g, n, seed)
    loss = sum(group_loss(case, t, theta_old, theta_ref, m) for m in draws) / n
    return torch.autograd.grad(loss, t)[0]


def z_999(coordinates: int) -> float:
    """The two-sided 99.9% normal quantile, Bonferroni-corrected over `coordinates`."""
    return float(torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor(1 - 0.001 / (2 * coordinates))))
