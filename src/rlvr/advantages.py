"""Group-relative advantages (DeepSeekMath §4.1.2, Shao et al. 2024).

Two independent settings shape an advantage:

- the **baseline** subtracted from each reward: the group mean (GRPO) or the mean of the
  *other* completions in the group (RLOO, leave-one-out);
- the **scale** it is divided by: the group's standard deviation (GRPO), the standard deviation
  of every reward in the batch ("batch"), or nothing (Dr. GRPO, which argues the per-group
  division over-weights near-unanimous groups); or "batch_norm": the centred advantages normalised
  over the whole batch, their mean removed and divided by their std (REINFORCE++, Hu et al. 2025).

With several rewards, `decoupled_sum` normalises each within its group before the weighted sum (GDPO,
Liu et al. 2026), which `batch_normalised` then normalises over the batch.

All functions are pure: rewards [P, G] in, advantages [P, G] out. A NaN reward marks a completion
that could not be scored (rlvr.rewards.batch.unscored): it is left out of its group's statistics
and gets advantage 0, so it neither pulls the baseline nor is pushed up or down itself.
"""

from __future__ import annotations

import itertools
import math

import torch

from rlvr.config.choices import BASELINES, SCALES, STD_ESTIMATORS, Baseline, Scale, StdEstimator


def zero_variance_groups(rewards: torch.Tensor) -> torch.Tensor:
    """[P, G] rewards -> [P] bool: True where every scored completion of the group scored the same
    (NaN = unscored; a group with fewer than two scored completions counts as uniform).

    Such groups carry no learning signal: every advantage is 0 (DAPO §3.2, Yu et al. 2025).

    >>> zero_variance_groups(torch.tensor([[1., 1.], [1., 0.], [1., float("nan")]])).tolist()
    [True, False, True]
    """
    scored = ~rewards.isnan()
    high = rewards.masked_fill(~scored, -torch.inf).amax(dim=-1)
    low = rewards.masked_fill(~scored, torch.inf).amin(dim=-1)
    return (high - low == 0) | (scored.sum(dim=-1) < 2)


def group_baseline(rewards: torch.Tensor, baseline: Baseline = "group_mean") -> torch.Tensor:
    """[P, G] -> [P, G]: the value each reward is compared against.

    leave_one_out: b_i = (Σ_j r_j − r_i) / (G − 1)  (RLOO, Ahmadian et al. 2024).

    >>> group_baseline(torch.tensor([[1., 0., 0., 1.]]), "leave_one_out").mul(3).round().tolist()
    [[1.0, 2.0, 2.0, 1.0]]
    """
    if baseline == "group_mean":
        return rewards.mean(dim=-1, keepdim=True).expand_as(rewards)
    if baseline == "leave_one_out":
        g = rewards.shape[-1]
        if g < 2:
            raise ValueError("leave-one-out baseline needs a group size of at least 2")
        return (rewards.sum(dim=-1, keepdim=True) - rewards) / (g - 1)
    raise ValueError(f"unknown baseline {baseline!r}; choose from {BASELINES}")


def reward_std(rewards: torch.Tensor, estimator: StdEstimator = "population") -> torch.Tensor:
    """Standard deviation over the last dimension, keepdim.

    population: σ = sqrt(1/G Σ (r − μ)²), the usual reading of DeepSeekMath's std(r) (§4.1.2);
    unbiased: the 1/(G − 1) estimator (what `torch.std` and TRL use by default).
    """
    return rewards.std(dim=-1, keepdim=True, correction=bessel(estimator))


def bessel(estimator: StdEstimator) -> int:
    """The estimator's correction to the count it divides by: 0 for the population std, 1 for the unbiased one.

    >>> bessel("population"), bessel("unbiased")
    (0, 1)
    """
    if estimator not in STD_ESTIMATORS:
        raise ValueError(f"unknown std estimator {estimator!r}; choose from {STD_ESTIMATORS}")
    return {"population": 0, "unbiased": 1}[estimator]


def reward_moments(rewards: torch.Tensor) -> tuple[float, float, float]:
    """(Σr, Σr², n) over the scored rewards: what ranks holding parts of a batch add up to get its std.

    >>> reward_moments(torch.tensor([[1., 0.], [2., float("nan")]]))
    (3.0, 5.0, 3.0)
    """
    r = rewards[~rewards.isnan()].double()
    return float(r.sum()), float((r * r).sum()), float(r.numel())


def std_from_moments(total: float, total_sq: float, count: float, estimator: StdEstimator = "population") -> float:
    """The standard deviation of rewards known by their moments (`reward_moments`, summed across ranks).

    >>> r = torch.tensor([[1., 0., 0.5, 0.25]])
    >>> round(std_from_moments(*reward_moments(r)), 6) == round(float(reward_std(r)[0, 0]), 6)
    True
    """
    correction = bessel(estimator)
    if count < 1 + correction:  # (no reward; or one, and no unbiased estimate from it)
        return float("nan")
    variance = max(0.0, total_sq / count - (total / count) ** 2)
    return math.sqrt(variance * count / (count - correction))


def group_advantages(
    rewards: torch.Tensor,
    *,
    baseline: Baseline = "group_mean",
    scale: Scale = "group_std",
    std_estimator: StdEstimator = "population",
    eps: float = 1e-4,
    batch_std: float | None = None,
) -> torch.Tensor:
    """Rewards [P, G] -> advantages [P, G]; defaults are DeepSeekMath's outcome supervision Â_i = (r_i − μ)/(σ + ε).

    Groups whose rewards are all equal get exactly zero advantage (not 0/ε noise from rounding).
    `batch_std`: with scale "batch_std", the std of the whole batch when `rewards` is only part of it
    (a data-parallel rank's groups); measured from `rewards` when None.

    The explorer's worked example (G = 8, five right: μ = 0.625, σ = 0.484):

    >>> a = group_advantages(torch.tensor([[1., 1., 1., 0., 1., 0., 0., 1.]]))
    >>> [round(x, 2) for x in a[0].tolist()]
    [0.77, 0.77, 0.77, -1.29, 0.77, -1.29, -1.29, 0.77]
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [P, G], got shape {tuple(rewards.shape)}")
    if scale == "batch_norm":  # REINFORCE++ (Hu et al. 2025): the group's baseline removed, then the batch's
        centred = group_advantages(rewards, baseline=baseline, scale="none", std_estimator=std_estimator, eps=eps)
        return batch_normalised(centred, counted(rewards), eps).masked_fill(zero_variance_groups(rewards)[:, None], 0)
    scored = ~rewards.isnan()
    if not bool(scored.all()):
        return _without_unscored(rewards, scored, baseline, scale, std_estimator, eps, batch_std)
    centred = rewards - group_baseline(rewards, baseline)
    if scale == "group_std":
        centred = centred / (reward_std(rewards, std_estimator) + eps)
    elif scale == "batch_std":
        std = reward_std(rewards.reshape(1, -1), std_estimator) if batch_std is None else batch_std
        centred = centred / (std + eps)
    elif scale != "none":
        raise ValueError(f"unknown advantage scale {scale!r}; choose from {SCALES}")
    return centred.masked_fill(zero_variance_groups(rewards).unsqueeze(-1), 0.0)


def _without_unscored(rewards: torch.Tensor, scored: torch.Tensor, baseline: Baseline, scale: Scale,
                      std_estimator: StdEstimator, eps: float, batch_std: float | None = None) -> torch.Tensor:
    """Each group's advantages computed over its scored completions only (the batch std over every scored
    reward); 0 for the unscored ones and for groups with fewer than two scored completions.

    >>> a = group_advantages(torch.tensor([[1., float("nan"), 0.], [float("nan"), 1., float("nan")]]))
    >>> [[round(x, 3) for x in row] for row in a.tolist()]
    [[1.0, 0.0, -1.0], [0.0, 0.0, 0.0]]
    """
    advantages = torch.zeros_like(rewards)
    divisor = None
    if scale == "batch_std":
        divisor = (reward_std(rewards[scored].reshape(1, -1), std_estimator)[0, 0] if batch_std is None
                   else torch.tensor(batch_std)) + eps
    for p in range(rewards.shape[0]):
        keep = scored[p]
        if int(keep.sum()) < 2:
            continue
        group = group_advantages(rewards[p, keep][None], baseline=baseline,
                                 scale="none" if divisor is not None else scale, std_estimator=std_estimator, eps=eps)
        advantages[p, keep] = group[0] if divisor is None else group[0] / divisor
    return advantages


def process_advantages(
    step_rewards: list[list[float]], step_ends: list[list[int]], num_tokens: int,
    *, normalise: bool = True, eps: float = 1e-4, dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Per-token advantages of one group under process supervision (DeepSeekMath §4.1.3).

    Completion i has steps j with rewards `step_rewards[i][j]` ending at token `step_ends[i][j]`
    (1-based: the step's last token, i.e. an exclusive 0-based end). The step rewards of the whole
    group are normalised together, r̃ = (r − mean) / (std + eps) (population std; `normalise=False`
    takes them as already normalised; `dtype`: the arithmetic's), and token t's advantage is the sum of r̃ over the steps
    ending at or after t — a return-to-go of step rewards. Tokens after the last step get 0.

    step_rewards, step_ends: G lists -> advantages [G, num_tokens]

    A worked example: steps ending at tokens 10, 20, 30 with r̃ = +0.5, −0.3, +0.8:

    >>> a = process_advantages([[0.5, -0.3, 0.8]], [[10, 20, 30]], 32, normalise=False)[0]
    >>> [round(float(a[t]), 6) for t in (0, 9, 10, 19, 20, 29, 30, 31)]  # tokens 1, 10, 11, 20, 21, 30, 31, 32
    [1.0, 1.0, 0.5, 0.5, 0.8, 0.8, 0.0, 0.0]
    """
    if len(step_rewards) != len(step_ends):
        raise ValueError("step_rewards and step_ends need one list per completion")
    for rewards, ends in zip(step_rewards, step_ends):
        if len(rewards) != len(ends):
            raise ValueError("each completion needs one end position per step reward")
        if any(b < a for a, b in itertools.pairwise(ends)) or any(not 0 < e <= num_tokens for e in ends):
            raise ValueError(f"step ends must not decrease and lie within 1..{num_tokens}, got {ends}")
    flat = torch.tensor([r for rewards in step_rewards for r in rewards], dtype=dtype)
    if normalise and flat.numel() > 0:
        flat = (flat - flat.mean()) / (flat.std(correction=0) + eps)
    advantages = torch.zeros(len(step_rewards), num_tokens, dtype=dtype)
    position = 0
    for i, ends in enumerate(step_ends):
        for end in ends:
            advantages[i, :end] += flat[position]  # this step's reward reaches every token up to its end
            position += 1
    return advantages


def turn_advantages(steps: list[list[tuple[int, float]]], num_turns: int, *, eps: float) -> torch.Tensor:
    """Per-turn advantages of one group's multi-turn trajectories: process supervision (DeepSeekMath §4.1.3)
    with turns for steps. Trajectory i was given reward r at turn k for each (k, r) in `steps[i]` (the rewards its
    turns earned, and its outcome at its last turn); the rewards of the whole group are normalised together,
    r̃ = (r − mean) / (std + eps), and turn k's advantage is the sum of r̃ over the trajectory's rewards at turns k
    and after: its return-to-go. -> [G, num_turns] (0 past a trajectory's last reward).

    Two trajectories: one rewarded 1 at turn 0 and 0 at its end (turn 1), one rewarded 1 at its end (turn 2).
    The rewards 1, 0, 1 normalise to 0.707, −1.414, 0.707:

    >>> a = turn_advantages([[(0, 1.0), (1, 0.0)], [(2, 1.0)]], 3, eps=0.0)
    >>> [[round(x, 3) for x in row] for row in a.tolist()]
    [[-0.707, -1.414, 0.0], [0.707, 0.707, 0.707]]
    """
    ordered = [sorted(s) for s in steps]
    return process_advantages([[r for _, r in s] for s in ordered], [[k + 1 for k, _ in s] for s in ordered],
                              num_turns, eps=eps)


def counted(rewards: torch.Tensor) -> torch.Tensor:
    """[P, G] -> [P, G] bool: the completions that take part in batch statistics: scored, in a group with at
    least two scored completions (the others' advantages are 0).

    >>> counted(torch.tensor([[1., float("nan")], [0., 1.]])).tolist()
    [[False, False], [True, True]]
    """
    scored = ~rewards.isnan()
    return scored & (scored.sum(dim=-1, keepdim=True) >= 2)


def masked_moments(values: torch.Tensor, keep: torch.Tensor) -> tuple[float, float, float]:
    """(Σx, Σx², n) over the entries `keep`: what ranks holding parts of a batch add up (reward_moments)."""
    return reward_moments(values.masked_fill(~keep, float("nan")))


def batch_normalised(values: torch.Tensor, keep: torch.Tensor, eps: float,
                     moments: tuple[float, float, float] | None = None) -> torch.Tensor:
    """(x − mean) / (std + ε) over the entries `keep` (population std), 0 elsewhere; `moments`: the whole
    batch's (Σx, Σx², n) when `values` is a rank's part of it.

    >>> batch_normalised(torch.tensor([[1., -1.], [3., 5.]]), torch.tensor([[True, True], [True, False]]), 0.0)
    tensor([[ 0.0000, -1.2247],
            [ 1.2247,  0.0000]])
    """
    total, total_sq, n = moments if moments is not None else masked_moments(values, keep)
    if n < 2:  # (none, or one value: no spread to normalise, and no signal)
        return torch.zeros_like(values)
    mean = total / n
    std = math.sqrt(max(0.0, total_sq / n - mean * mean))
    return torch.where(keep, (values - mean) / (std + eps), 0.0)


def decoupled_sum(components: dict[str, torch.Tensor], weights: dict[str, float], *,
                  baseline: Baseline = "group_mean", std_estimator: StdEstimator = "population",
                  eps: float) -> torch.Tensor:
    """GDPO (Liu et al. 2026, "Group reward-Decoupled Normalization"): Σ_k w_k (r_k − μ_k)/(σ_k + ε), each
    reward normalised within its group over the completions it scored (NaN: it did not apply: 0 there),
    before the weighted sum; `batch_normalised` then normalises the sum over the batch. Summed first, as
    GRPO does, rewards of different scales collapse distinct combinations into one advantage.
    components: name -> [P, G]; -> [P, G].

    >>> decoupled_sum({"right": torch.tensor([[1., 1., 0., 0.]]), "short": torch.tensor([[1., 0., 1., 0.]])},
    ...               {"right": 1.0, "short": 0.5}, eps=0.0).tolist()
    [[1.5, 0.5, -0.5, -1.5]]
    """
    total: torch.Tensor | None = None
    for name, rewards in components.items():
        part = weights.get(name, 1.0) * group_advantages(rewards, baseline=baseline, scale="group_std",
                                                          std_estimator=std_estimator, eps=eps)
        total = part if total is None else total + part
    if total is None:
        raise ValueError("decoupled_sum needs at least one reward component")
    return total
