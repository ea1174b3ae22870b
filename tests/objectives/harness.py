"""The rlvr loss of one group on the toy policy, as the step computes it: the step's own records and
functions (a Rollout and a ScoredRollout of the group, the trainer's outcome_advantages, make_batch on a toy
Policy for log π_old, log π_ref, the loss mask and the entropy mask, the step's micro-batches, batch_counts and
micro_batch_loss), and its gradient in expectation over every group (exact) or over sampled groups (Monte Carlo).
Nothing of the composition is written here: a mutant in the step's masks, weights or counts fails the proofs."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import torch

from rlvr.config import AlgorithmConfig
from rlvr.distributed.world import SINGLE
from rlvr.records import Example, Rollout, ScoredRollout
from rlvr.rl.batch import make_batch, micro_batches, outcome_advantages
from rlvr.rl.update import batch_counts, micro_batch_loss

from .toy import F64, MASK, PREFIX, TOKENS, T, all_groups, sampled_groups, token_logprobs


@dataclasses.dataclass
class Case:
    algo: AlgorithmConfig
    reward: torch.Tensor  # [7] each completion's reward (NaN: unscored)
    components: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # name -> [7]
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    g: int = 3
    drop_last: bool = False  # the last completion of every group unscored (a reward that failed)
    per_token: object = None  # fn(members) -> [G, T] advantages (process supervision), else outcome's

    @property
    def constant(self) -> float:
        """The constant aggregation's normaliser: algorithm.loss_constant, else the budget T (the step's rule)."""
        return self.algo.loss_constant or T


class ToyPolicy:
    """What make_batch asks of the run's Policy, on the toy: the weights the batch was sampled with (θ_old),
    and π_ref; the rows of a micro-batch are the group's members."""

    world = SINGLE

    def __init__(self, members: torch.Tensor, theta_old: torch.Tensor, theta_ref: torch.Tensor | None):
        self.members, self.theta_old, self.reference = members, theta_old.detach(), theta_ref

    def share_prompt(self, reference: bool = False) -> bool:
        return True

    def equal_counts(self, runs):
        return runs

    def logprobs(self, mb, temperature):
        return self._stats(self.theta_old, mb)

    def reference_logprobs(self, mb, temperature):
        return self._stats(self.reference.detach(), mb)

    def _stats(self, theta, mb):
        rows, lc = self.members[mb.rows], mb.completion_ids.shape[1]
        probs = torch.softmax(theta, -1)
        entropy = -(probs * probs.log()).sum(-1)[PREFIX[rows]]
        return SimpleNamespace(logprobs=token_logprobs(theta)[rows][:, :lc], entropy=entropy[:, :lc])


def scored_group(case: Case, members: torch.Tensor, theta_old: torch.Tensor) -> ScoredRollout:
    """The group as the step's records: its completions (sampled from θ_old) and their rewards."""
    reward = case.reward[members].clone()
    if case.drop_last:
        reward[-1] = float("nan")
    g = len(members)
    rollout = Rollout(examples=[Example("toy")], group_size=g, prompt_ids=torch.zeros(1, 1, dtype=torch.long),
                      prompt_mask=torch.ones(1, 1, dtype=torch.bool), completion_ids=TOKENS[members],
                      completion_mask=MASK[members], sampling_logprobs=token_logprobs(theta_old).detach()[members],
                      truncated=torch.zeros(g, dtype=torch.bool), completions=[""] * g)
    return ScoredRollout(rollout=rollout, rewards=reward[None],
                         reward_components={k: v[members][None] for k, v in case.components.items()},
                         reward_seconds={})


def group_loss(case: Case, theta, theta_old, theta_ref, members: torch.Tensor) -> torch.Tensor:
    """The step's loss of one group at θ: a batch made from the group sampled at θ_old (off-policy, as the
    later of μ updates, when θ ≠ θ_old), then micro_batch_loss on each of the step's micro-batches."""
    scored = scored_group(case, members, theta_old)
    if case.per_token is not None:
        advantages = case.per_token(members)
    else:
        advantages = outcome_advantages(scored, case.algo, SINGLE, case.weights)
    later = not torch.equal(theta.detach(), theta_old.detach())  # π_old is then the batch's own log-probs
    built = dataclasses.replace(case.algo, updates_per_batch=2) if later else case.algo
    ref = theta_ref if case.algo.beta > 0 else None
    batch = make_batch(scored, advantages.to(F64), policy=ToyPolicy(members, theta_old, ref), algo=built,
                       micro_batch_tokens=10_000, temperature=1.0)
    counts, logprobs = batch_counts(batch, SINGLE), token_logprobs(theta)[members]
    return sum(micro_batch_loss(batch, mb, logprobs[mb.rows, :mb.completion_ids.shape[1]], case.algo,
                                counts=counts, max_new_tokens=T).loss
               for mb in micro_batches(batch.rollout, batch.loss_mask, 10_000))


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
