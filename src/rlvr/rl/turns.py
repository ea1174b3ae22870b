"""Per-turn advantages of multi-turn rollouts (`algorithm.turn_advantages: per_turn`).

An agent (`link.reward`) or an environment (a Reply's reward before the end) may reward single turns: a game's
points, a test run after an edit. By default those rewards add to the trajectory's reward (its return), and
every token of the trajectory gets its one group-relative advantage. With `per_turn`, the turns are the steps of
process supervision (DeepSeekMath §4.1.3; rlvr.advantages.turn_advantages): each reward sits at the turn it was
given for, the trajectory's outcome (its reward less its turns' rewards) at its last turn; a group's rewards
are normalised together, and each turn's tokens get the sum of the normalised rewards from that turn on. A turn
is thus credited with what followed it, not with what came before.

    ScoredRollout ─(turn, reward) steps per trajectory─▶ [G, turns] per group ─row_turns─▶ advantages [N', Lc]
"""

from __future__ import annotations

import math

import torch

from rlvr.advantages import turn_advantages
from rlvr.errors import UserError
from rlvr.records import ScoredRollout
from rlvr.rewards.batch import turn_returns


def turn_batch_advantages(scored: ScoredRollout, eps: float = 1e-4) -> torch.Tensor:
    """[N', Lc] per-token advantages: each model token's turn's return-to-go of group-normalised rewards; 0 for
    context, padding, unscored trajectories and groups with fewer than two scored ones."""
    rollout, g = scored.rollout, scored.rollout.group_size
    if rollout.row_turns is None or rollout.turn_rewards is None:
        raise UserError("algorithm.turn_advantages: per_turn needs multi-turn rollouts, whose tokens know their "
                        "turn: set environment.name")
    of = rollout.trajectory_of_rows
    n = rollout.num_prompts * g
    last = torch.full((n,), -1, dtype=torch.long).scatter_reduce(0, of, rollout.row_turns.amax(-1), "amax")
    rewards, earned = scored.rewards.reshape(-1).tolist(), turn_returns(rollout).reshape(-1).tolist()
    width = 1 + max([int(last.max()), *(k for turns in rollout.turn_rewards for k in turns)])
    per_turn = torch.zeros(n, max(width, 1))
    for p in range(rollout.num_prompts):
        members = [t for t in range(p * g, (p + 1) * g) if not math.isnan(rewards[t]) and int(last[t]) >= 0]
        if len(members) < 2:
            continue
        # (the outcome, its reward less its turns', at its last trained turn: every token it has is at or before it)
        steps = [[*rollout.turn_rewards[t].items(), (int(last[t]), rewards[t] - earned[t])] for t in members]
        per_turn[members] = turn_advantages(steps, per_turn.shape[1], eps=eps)
    turn = rollout.row_turns
    return torch.where(turn >= 0, per_turn[of].gather(1, turn.clamp(min=0)), 0.0)
