"""Dynamic sampling (DAPO, Yu et al. 2025, Sec. 3.2): no step wasted on groups that teach nothing.

A group whose G rewards are all equal has zero advantage everywhere, so it adds no gradient (only
normaliser weight). With `sampling.dynamic_sampling` such groups are set aside and fresh prompts are
sampled until the batch holds P informative groups, for at most `sampling.max_sampling_rounds`
rounds; if the cap is reached, the batch is topped up with set-aside groups so its size stays P.

    ScoredRollout (round 1) ─▶ keep informative groups ─▶ sample more ─▶ … ─▶ ScoredRollout [P groups]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from rlvr.advantages import zero_variance_groups
from rlvr.records import Rollout, ScoredRollout
from rlvr.rewards.batch import joined, padded_columns

# what a multi-turn rollout keeps per completion besides its tensors (rlvr.envs.sampling)
CONVERSATION_FIELDS = ("env_rewards", "env_info", "transcripts", "turn_rewards")
_Pad = Callable[[torch.Tensor, int, float], torch.Tensor]  # (tensor, width, fill value) -> padded to width


@dataclass(frozen=True)
class FillStats:
    rounds: int  # sampling rounds spent on this batch (1 = no resampling)
    dropped_groups: int  # zero-variance groups set aside
    padded_groups: int  # set-aside groups put back because the cap was reached


def fill_informative(first: ScoredRollout, sample_more: Callable[[int], ScoredRollout], max_rounds: int,
                     all_done: Callable[[bool], bool] = bool) -> tuple[ScoredRollout, FillStats]:
    """P informative groups if `max_rounds` rounds can find them; `sample_more(round)` samples P more.

    Data-parallel, each rank fills its own share and `all_done(mine)` says whether every rank's is
    full: a rank keeps sampling rounds while another still needs one, so that all draw the same
    global batches and their prompt streams stay identical."""
    want = first.rollout.num_prompts
    sampled = [first]
    kept: list[ScoredRollout] = []
    spare: list[ScoredRollout] = []
    while True:
        scored = sampled[-1]
        informative = ~zero_variance_groups(scored.rewards)
        have = sum(k.rollout.num_prompts for k in kept)
        kept.append(take_groups(scored, informative.nonzero().flatten().tolist()[: want - have]))
        spare.append(take_groups(scored, (~informative).nonzero().flatten().tolist()))
        if all_done(have + kept[-1].rollout.num_prompts == want) or len(sampled) == max_rounds:
            break
        sampled.append(sample_more(len(sampled)))
    short = want - sum(k.rollout.num_prompts for k in kept)
    parts = kept + ([take_groups(concat_scored(spare), list(range(short)))] if short else [])
    batch = replace(concat_scored([p for p in parts if p.rollout.num_prompts]),
                    reward_seconds=concat_scored(sampled).reward_seconds)  # every round's scoring time
    dropped = sum(s.rollout.num_prompts for s in spare)
    return batch, FillStats(rounds=len(sampled), dropped_groups=dropped, padded_groups=short)


def take_groups(scored: ScoredRollout, groups: list[int]) -> ScoredRollout:
    """The ScoredRollout of the given groups (prompts), in that order (the metrics its rewards logged stay whole:
    the calls that logged them were made)."""
    r, g = scored.rollout, scored.rollout.group_size
    trajectories = [p * g + j for p in groups for j in range(g)]
    index = torch.tensor(groups, dtype=torch.long)
    # the rows of those trajectories (a harness trajectory may have several), and the prompts they continue
    of, row_prompt = r.trajectory_of_rows.tolist(), r.prompt_of_rows.tolist()
    at = {t: k for k, t in enumerate(trajectories)}
    rows = torch.tensor(sorted((i for i in range(len(of)) if of[i] in at), key=lambda i: (at[of[i]], i)),
                        dtype=torch.long)
    heads = list(dict.fromkeys(row_prompt[i] for i in rows.tolist()))
    rollout = Rollout(
        examples=[r.examples[p] for p in groups], group_size=g,
        prompt_ids=r.prompt_ids[heads], prompt_mask=r.prompt_mask[heads],
        completion_ids=r.completion_ids[rows], completion_mask=r.completion_mask[rows],
        sampling_logprobs=r.sampling_logprobs[rows], truncated=r.truncated[rows],
        completions=[r.completions[t] for t in trajectories],
        model_mask=r.model_mask[rows] if r.model_mask is not None else None,
        **_any({name: [getattr(r, name)[t] for t in trajectories] for name in CONVERSATION_FIELDS
                if getattr(r, name) is not None}),
        support_floors=r.support_floors[rows] if r.support_floors is not None else None, version=r.version,
        row_turns=r.row_turns[rows] if r.row_turns is not None else None,
        row_trajectory=(None if r.row_trajectory is None
                        else torch.tensor([at[of[i]] for i in rows.tolist()], dtype=torch.long)),
        row_prompt=(None if r.row_prompt is None
                    else torch.tensor([heads.index(row_prompt[i]) for i in rows.tolist()], dtype=torch.long)),
    )
    return ScoredRollout(
        rollout=rollout, rewards=scored.rewards[index],
        reward_components={k: v[index] for k, v in scored.reward_components.items()},
        reward_seconds=dict(scored.reward_seconds), logged_metrics=scored.logged_metrics,
        extra_columns={k: [v[t] for t in trajectories] for k, v in scored.extra_columns.items()},
    )


def concat_scored(parts: list[ScoredRollout]) -> ScoredRollout:
    """One ScoredRollout of all groups of `parts`: prompts re-padded on the left, completions on the right."""
    rollouts = [p.rollout for p in parts]  # padding ids are 0: masked out everywhere they are read
    lp = max(r.prompt_ids.shape[1] for r in rollouts)
    lc = max(r.completion_ids.shape[1] for r in rollouts)
    left: _Pad = lambda t, width, value: torch.nn.functional.pad(t, (width - t.shape[1], 0), value=value)  # noqa: E731
    right: _Pad = lambda t, width, value: torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)  # noqa: E731
    turns = [r.row_turns for r in rollouts if r.row_turns is not None]
    rollout = Rollout(
        examples=[ex for r in rollouts for ex in r.examples], group_size=rollouts[0].group_size,
        prompt_ids=torch.cat([left(r.prompt_ids, lp, 0) for r in rollouts]),
        prompt_mask=torch.cat([left(r.prompt_mask, lp, False) for r in rollouts]),
        completion_ids=torch.cat([right(r.completion_ids, lc, 0) for r in rollouts]),
        completion_mask=torch.cat([right(r.completion_mask, lc, False) for r in rollouts]),
        sampling_logprobs=torch.cat([right(r.sampling_logprobs, lc, 0.0) for r in rollouts]),
        truncated=torch.cat([r.truncated for r in rollouts]),
        completions=[c for r in rollouts for c in r.completions],
        model_mask=(torch.cat([right(r.model_mask if r.model_mask is not None else r.completion_mask, lc, False)
                               for r in rollouts]) if any(r.model_mask is not None for r in rollouts) else None),
        **_any({name: [x for r in rollouts for x in getattr(r, name)] for name in CONVERSATION_FIELDS
                if all(getattr(r, name) is not None for r in rollouts)}),
        support_floors=(torch.cat([right(_floors(r), lc, -math.inf) for r in rollouts])
                        if any(r.support_floors is not None for r in rollouts) else None),
        version=min(r.version for r in rollouts),  # (the oldest weights any of it was sampled with)
        row_turns=torch.cat([right(t, lc, -1) for t in turns]) if len(turns) == len(rollouts) else None,
    )
    if any(r.row_trajectory is not None for r in rollouts):
        trajectories, prompts = _rows_of_trajectories(rollouts)
        rollout = replace(rollout, row_trajectory=trajectories, row_prompt=prompts)
    names = list(parts[0].reward_components)
    seconds: dict[str, float] = {}
    for p in parts:
        for name, value in p.reward_seconds.items():
            seconds[name] = seconds.get(name, 0.0) + value
    return ScoredRollout(
        rollout=rollout, rewards=torch.cat([p.rewards for p in parts]),
        reward_components={n: torch.cat([p.reward_components[n] for p in parts]) for n in names},
        reward_seconds=seconds, logged_metrics=joined([p.logged_metrics for p in parts]),
        extra_columns=padded_columns([(p.rewards.numel(), p.extra_columns) for p in parts]),
    )


def _floors(r: Rollout) -> torch.Tensor:
    """A rollout's support floors, −inf (nothing cut) where it has none."""
    return r.support_floors if r.support_floors is not None else torch.full(r.completion_ids.shape, -math.inf)


def _rows_of_trajectories(rollouts: list[Rollout]) -> tuple[torch.Tensor, torch.Tensor]:
    """row_trajectory and row_prompt of rollouts put end to end (rlvr.harness: several rows to a trajectory)."""
    trajectories, prompts, t0, p0 = [], [], 0, 0
    for r in rollouts:
        trajectories.append(r.trajectory_of_rows + t0)
        prompts.append(r.prompt_of_rows + p0)
        t0, p0 = t0 + r.num_prompts * r.group_size, p0 + r.prompt_ids.shape[0]
    return torch.cat(trajectories), torch.cat(prompts)


def _any(fields: dict[str, list[Any]]) -> dict[str, Any]:
    """(the conversation fields, typed for Rollout's keyword arguments)"""
    return fields
