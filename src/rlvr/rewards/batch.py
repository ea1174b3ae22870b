"""The rewards stage of a step: every reward function on every completion of a Rollout.

    Rollout ─score_rollout─▶ ScoredRollout      rewards [P, G] and each function's own values

Reward functions are called the way TRL calls them (rlvr.rewards.combine), with the rows' columns as
keywords; a chat prompt's completions are handed over as assistant messages, as TRL does.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from rlvr.records import Example, Rollout, ScoredRollout
from rlvr.rewards.combine import RewardResult, RewardSpec, compute_rewards
from rlvr.rewards.trainer_hooks import StepState


def unscored(components: dict[str, torch.Tensor]) -> torch.Tensor:
    """[P, G] True for a completion that has no reward to learn from.

    None (NaN here) from a reward means "does not apply" when it holds for the whole group: rewards
    are routed by the row (`when`, a rule reward on a general prompt), and a row is the same for all
    G completions. A reward that scores some completions of a group but not others could not score
    those (a sandbox failure, an answer its checker could not parse): they are unscored, and so is a
    completion no reward applies to. Unscored completions are left out of their group's statistics
    and of the loss (rlvr.advantages), never given a reward of 0.

    >>> nan = float("nan")
    >>> unscored({"accuracy": torch.tensor([[1., nan, 0.], [nan, nan, nan]]),
    ...           "format": torch.tensor([[1., 1., 0.], [nan, nan, nan]])}).tolist()
    [[False, True, False], [True, True, True]]
    >>> unscored({"rule": torch.tensor([[nan, nan]]), "judge": torch.tensor([[0.5, 1.]])}).tolist()
    [[False, False]]
    """
    nan = torch.stack(list(components.values())).isnan()  # [R, P, G]
    partial = nan & ~nan.all(dim=-1, keepdim=True)  # None here, a value for another completion of the group
    return nan.all(dim=0) | partial.any(dim=0)


def reward_inputs(examples: list[Example], group_size: int, texts: list[str], ids: list[list[int]]) -> dict[str, Any]:
    """TRL's keyword arguments for the completions of `examples` (G consecutive ones per example)."""
    prompts = [ex.prompt for ex in examples for _ in range(group_size)]
    completions: list[Any] = [
        [{"role": "assistant", "content": text}] if isinstance(prompt, list) else text
        for prompt, text in zip(prompts, texts)
    ]
    keys = sorted({k for ex in examples for k in ex.columns})
    columns = {k: [ex.columns.get(k) for ex in examples for _ in range(group_size)] for k in keys}
    return {"prompts": prompts, "completions": completions, "completion_ids": ids, "columns": columns}


def completion_token_ids(rollout: Rollout) -> list[list[int]]:
    """Each completion's sampled token ids (padding removed); a harness trajectory's (rlvr.harness): the model's
    last message (the last run of sampled ids of its last row), whose text is its `completions` entry."""
    if rollout.row_trajectory is None:
        return [row[mask].tolist() for row, mask in zip(rollout.completion_ids, rollout.completion_mask)]
    model = (rollout.model_mask if rollout.model_mask is not None else rollout.completion_mask).tolist()
    last = _last_rows(rollout)
    out = []
    for t in range(rollout.num_prompts * rollout.group_size):
        marks = model[last[t]] if t in last else []
        end = max((i + 1 for i, m in enumerate(marks) if m), default=0)
        start = end
        while start > 0 and marks[start - 1]:
            start -= 1
        out.append(rollout.completion_ids[last[t], start:end].tolist() if t in last else [])
    return out


def completion_truncated(rollout: Rollout) -> list[bool]:
    """Whether each completion was cut at its token budget (a harness trajectory: its last row)."""
    if rollout.row_trajectory is None:
        return [bool(t) for t in rollout.truncated.tolist()]
    last = _last_rows(rollout)
    return [bool(rollout.truncated[last[t]]) if t in last else False
            for t in range(rollout.num_prompts * rollout.group_size)]


def _last_rows(rollout: Rollout) -> dict[int, int]:
    """Each trajectory's last row (a harness trajectory may have several: rlvr.harness)."""
    return {int(t): row for row, t in enumerate(rollout.trajectory_of_rows.tolist())}


def score_rollout(rollout: Rollout, specs: list[RewardSpec], state: StepState | None = None) -> ScoredRollout:
    """Run every reward function on every completion, in one call per function; `state`: the training step
    they are scored for (rlvr.rewards.trainer_hooks; None: outside training)."""
    inputs = reward_inputs(rollout.examples, rollout.group_size, rollout.completions, completion_token_ids(rollout))
    if rollout.env_rewards is not None:  # what the environments said, for the `environment_reward` reward
        inputs["columns"]["env_reward"] = list(rollout.env_rewards)
    return scored_rollout(rollout, [compute_rewards(specs, **inputs, state=state)])


def turn_returns(rollout: Rollout) -> torch.Tensor:
    """[P, G]: the rewards each trajectory's turns were given (`Rollout.turn_rewards`), summed; 0 for one-turn
    rollouts. They add to the trajectory's reward: its return."""
    shape = (rollout.num_prompts, rollout.group_size)
    if rollout.turn_rewards is None:
        return torch.zeros(shape)
    return torch.tensor([sum(turns.values()) for turns in rollout.turn_rewards], dtype=torch.float32).view(shape)


def scored_rollout(rollout: Rollout, parts: list[RewardResult]) -> ScoredRollout:
    """Assemble per-group (or whole-batch) reward results, in row order, into a ScoredRollout; the total
    of an unscored completion is NaN; a multi-turn trajectory's includes its turns' rewards (`turn_returns`).
    What the rewards logged (TRL's log_metric, log_extra) is kept: metric values in call order, extra columns
    in row order."""
    shape = (rollout.num_prompts, rollout.group_size)
    total = [t for part in parts for t in part.total]
    names = list(parts[0].components)
    components = {
        name: torch.tensor([math.nan if v is None else v for part in parts for v in part.components[name]],
                           dtype=torch.float32).view(shape)
        for name in names
    }
    return ScoredRollout(
        rollout=rollout,
        rewards=(torch.tensor(total, dtype=torch.float32).view(shape) + turn_returns(rollout)).masked_fill(
            unscored(components), math.nan),
        reward_components=components,
        reward_seconds={name: sum(part.seconds[name] for part in parts) for name in names},
        logged_metrics=joined([part.logged for part in parts]),
        extra_columns=padded_columns([(len(part.total), part.extra) for part in parts]),
    )


def joined(parts: list[dict[str, list[float]]]) -> dict[str, list[float]]:
    """Each name's values from every part, in order.

    >>> joined([{"len": [3.0]}, {"len": [5.0], "tries": [1.0]}])
    {'len': [3.0, 5.0], 'tries': [1.0]}
    """
    names = dict.fromkeys(name for part in parts for name in part)
    return {name: [v for part in parts for v in part.get(name, [])] for name in names}


def padded_columns(parts: list[tuple[int, dict[str, list[Any]]]]) -> dict[str, list[Any]]:
    """Columns of consecutive parts of (rows, columns) end to end, None for rows of a part without the column.

    >>> padded_columns([(2, {"why": ["a", "b"]}), (1, {})])
    {'why': ['a', 'b', None]}
    """
    names = dict.fromkeys(name for _, columns in parts for name in columns)
    return {name: [v for n, columns in parts for v in columns.get(name, [None] * n)] for name in names}
