"""Control runs: the same job trained on rewards that carry no information about correctness.

A gain over the untrained model proves little by itself: random rewards lifted Qwen2.5-Math-7B by 21 points on
MATH-500 and format-only rewards by 14-16 (Shao et al. 2025, "Spurious Rewards: Rethinking Training Signals in
RLVR", arXiv 2506.10947). A control run trains exactly as the run it controls (the same seeds, data order,
sampling, objective and evaluation) with what the verifiers said replaced before the advantages are computed;
the gain of the real run over its control is what the rewards taught (`rlvr compare RUN CONTROL`).

- `random`: each reward becomes a coin, per prompt's group, at the rate that reward paid on the group: the coin
  lands on the group's highest value of that reward with probability (mean − lowest) / (highest − lowest), else
  on its lowest. A 0/1 reward's coin pays 1 at the group's pass rate, so every group keeps its mean reward and
  its chance of carrying signal in expectation, but which completion is paid is chance.
- `format`: the format rewards alone (`boxed_format`, `think_answer_format`, `soft_think_answer_format`); every
  other reward scores 0.

What the verifiers said is still what the run logs (`reward/...`, `accuracy`); `control/reward/mean` is what it
trained on.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from rlvr.config.choices import FORMAT_NAMES, Control
from rlvr.errors import UserError
from rlvr.records import ScoredRollout
from rlvr.seeds import seed_of, uniforms

FORMAT_REWARDS = tuple(f"{name}_format" for name in FORMAT_NAMES)
_COIN = 0xC017  # a seed part no sampler uses: the coins never share a stream with the sampled tokens

DESCRIPTIONS: dict[str, str] = {
    "random": ("random rewards: each reward replaced by a coin at the rate it paid on the prompt's group "
               "(the group's highest value with probability (mean - lowest) / (highest - lowest), else its lowest)"),
    "format": f"format rewards alone: every reward but {', '.join(FORMAT_REWARDS)} scores 0",
}


def coin_rewards(values: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """[P, G] one reward's values, [P, G] uniforms in [0, 1) -> [P, G] coins: each group's highest value where
    u < (mean − lowest) / (highest − lowest), else its lowest; NaN (unscored) stays NaN.

    >>> values = torch.tensor([[1., 0., 0., 0.], [.5, .5, 1., 1.]])
    >>> coin_rewards(values, torch.tensor([[.1, .3, .2, .9], [.6, .4, .2, .5]]))
    tensor([[1.0000, 0.0000, 1.0000, 0.0000],
            [0.5000, 1.0000, 1.0000, 0.5000]])
    """
    scored = ~values.isnan()
    low = values.masked_fill(~scored, math.inf).amin(dim=1, keepdim=True)
    high = values.masked_fill(~scored, -math.inf).amax(dim=1, keepdim=True)
    mean = values.nan_to_num(0.0).sum(dim=1, keepdim=True) / scored.sum(dim=1, keepdim=True).clamp(min=1)
    rate = ((mean - low) / (high - low)).nan_to_num(0.0)  # (a group of one value: its coin always lands on it)
    return torch.where(u < rate, high, low).masked_fill(~scored, math.nan)


def check_control(control: Control, reward_names: list[str]) -> None:
    """A control the run's rewards allow, or a one-line error naming the fix."""
    if control == "format" and not any(name in FORMAT_REWARDS for name in reward_names):
        raise UserError(f"control=format keeps the format rewards alone, and this run has none (its rewards: "
                        f"{', '.join(reward_names)}): add one, e.g. {{name: boxed_format, weight: 0.1}}, or use "
                        "control=random")


def controlled(scored: ScoredRollout, control: str, weights: dict[str, float], seed: int,
               step: int) -> ScoredRollout:
    """`scored` with its rewards replaced as `control` says (unchanged for `none`): each component, and the
    total recomputed from them with `weights` (Σ weight · reward over the scored ones, NaN where none is). The
    coins of completion j of the prompt at row `index` of the data at `step` come from seed
    (seed, step, index, j), so a run and its rerun draw the same ones, sampling ahead or not."""
    if control == "none":
        return scored
    if control == "format":
        parts = {name: v if name in FORMAT_REWARDS else torch.zeros_like(v).masked_fill(v.isnan(), math.nan)
                 for name, v in scored.reward_components.items()}
    else:
        rollout = scored.rollout
        seeds = [seed_of(seed, _COIN, step, ex.index, j) for ex in rollout.examples for j in range(rollout.group_size)]
        shape = scored.rewards.shape
        parts = {name: coin_rewards(v, uniforms(seeds, k).view(shape).float())  # (draw k of each stream: reward k's)
                 for k, (name, v) in enumerate(scored.reward_components.items())}
    total = weighted_total(parts, weights).masked_fill(scored.rewards.isnan(), math.nan)  # (unscored stay so)
    return replace(scored, rewards=total, reward_components=parts)


def weighted_total(parts: dict[str, torch.Tensor], weights: dict[str, float]) -> torch.Tensor:
    """[P, G] Σ weight · reward over the rewards that scored each completion (a reward's NaN adds nothing), as
    rlvr.rewards.combine adds them.

    >>> weighted_total({"a": torch.tensor([[1., float("nan")]]), "b": torch.tensor([[1., 1.]])}, {"b": .1})
    tensor([[1.1000, 0.1000]])
    """
    stacked = torch.stack(list(parts.values()))
    w = torch.tensor([weights.get(name, 1.0) for name in parts]).view(-1, 1, 1)
    return (stacked.nan_to_num(0.0) * w).sum(dim=0)
