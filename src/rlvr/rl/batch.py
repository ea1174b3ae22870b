"""From scored completions to a TrainBatch: advantages, and the log-probabilities the loss compares against.

    ScoredRollout ─outcome_advantages─▶ [N, Lc] ─make_batch─▶ TrainBatch (+ log π_old when μ > 1, log π_ref when β > 0)

Every forward pass goes through token-budgeted micro-batches of consecutive rows (a group's
completions stay together, so each prompt is computed once per micro-batch; rlvr.logprobs).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.advantages import (
    batch_normalised,
    counted,
    decoupled_sum,
    group_advantages,
    masked_moments,
    reward_moments,
    std_from_moments,
)
from rlvr.config import AlgorithmConfig
from rlvr.distributed.world import SINGLE, World, gather_across, sum_across
from rlvr.losses import high_entropy_tokens
from rlvr.records import Rollout, ScoredRollout, TrainBatch
from rlvr.rewards.batch import completion_truncated
from rlvr.rl.objective import user_advantages
from rlvr.run.policy import Policy


def outcome_advantages(scored: ScoredRollout, algo: AlgorithmConfig, world: World = SINGLE,
                       weights: dict[str, float] | None = None) -> torch.Tensor:
    """[P, G] rewards -> [N, Lc] advantages: each completion's group-relative advantage on every one of
    its tokens (outcome supervision, DeepSeekMath §4.1.2). Groups are whole on each rank, so only the
    batch statistics need the other ranks' numbers: their moments, summed. `weights`: each reward's (GDPO's
    normalize_then_sum weighs the normalised rewards)."""
    rewards, batch_std, normalise = scored.rewards, None, False
    if algo.advantage_fn is not None:
        per_completion = user_advantages(algo.advantage_fn, rewards, scored.reward_components, algo.timeout_s)
    elif algo.reward_aggregation == "normalize_then_sum" or algo.advantage_scale == "batch_norm":
        per_completion, normalise = _centred(scored, algo, weights or {}), True
    else:
        if algo.advantage_scale == "batch_std" and world.distributed:
            r_sum, r_sq_sum, r_count = sum_across(reward_moments(rewards), world)
            batch_std = std_from_moments(r_sum, r_sq_sum, r_count, algo.std_estimator)
        per_completion = group_advantages(rewards, baseline=algo.advantage_baseline, scale=algo.advantage_scale,
                                          std_estimator=algo.std_estimator, eps=algo.advantage_eps,
                                          batch_std=batch_std)
    if normalise:  # (GDPO's last step, and REINFORCE++'s: over the whole batch, every rank's part of it)
        keep, uniform = counted(rewards), (per_completion == 0).all(dim=-1, keepdim=True)  # (groups with no signal)
        moments = masked_moments(per_completion, keep)
        total = tuple(sum_across(list(moments), world)) if world.distributed else moments
        per_completion = batch_normalised(per_completion, keep, algo.advantage_eps, total)  # type: ignore[arg-type]
        per_completion = per_completion.masked_fill(uniform, 0.0)
    rollout = scored.rollout  # (a trajectory's advantage on every one of its rows: rlvr.harness)
    return per_completion.reshape(-1)[rollout.trajectory_of_rows][:, None].expand(-1, rollout.completion_ids.shape[1])


def _centred(scored: ScoredRollout, algo: AlgorithmConfig, weights: dict[str, float]) -> torch.Tensor:
    """Before the batch normalisation: GDPO's sum of group-normalised rewards, or the rewards less their
    group baseline (REINFORCE++)."""
    if algo.reward_aggregation == "normalize_then_sum":
        unscored = scored.rewards.isnan()
        parts = {k: v.masked_fill(unscored, float("nan")) for k, v in scored.reward_components.items()}
        return decoupled_sum(parts, weights, baseline=algo.advantage_baseline, std_estimator=algo.std_estimator,
                             eps=algo.advantage_eps).masked_fill(unscored, 0.0)
    return group_advantages(scored.rewards, baseline=algo.advantage_baseline, scale="none")


@dataclass(frozen=True)
class MicroBatch:
    """Consecutive completions of a TrainBatch with the prompts they continue, trimmed to their
    own longest prompt and completion."""

    rows: torch.Tensor  # [m] indices into the batch
    prompt_ids: torch.Tensor  # [k, lp] the k prompts these rows continue
    prompt_mask: torch.Tensor  # [k, lp]
    row_prompt: torch.Tensor  # [m] which of the k prompts each row continues
    completion_ids: torch.Tensor  # [m, lc]
    completion_mask: torch.Tensor  # [m, lc]
    loss_mask: torch.Tensor  # [m, lc]
    support_floors: torch.Tensor | None = None  # [m, lc] where the sampler cut its distribution (rlvr.rollout)
    sequences: torch.Tensor | None = None  # [m] each row's trajectory, numbered here, where one spans rows (harness)


def micro_batches(rollout: Rollout, loss_mask: torch.Tensor, max_tokens: int,
                  share_prompt: bool = True) -> list[MicroBatch]:
    """Split the N completions into runs of consecutive rows holding at most `max_tokens` real
    tokens: each prompt counted once when it is computed once per micro-batch (`share_prompt`, see
    rlvr.logprobs), else once with every completion, as it is then run.
    Consecutive rows keep a group's completions together, and a trajectory's rows (rlvr.harness) stay in one
    micro-batch (GSPO's ratio is the trajectory's); a row (a trajectory) longer than the budget goes alone."""
    prompt_of, n = rollout.prompt_of_rows.tolist(), rollout.completion_ids.shape[0]
    trajectory_of = rollout.trajectory_of_rows.tolist()
    prompt_len, lengths = rollout.prompt_mask.sum(-1).tolist(), rollout.lengths.tolist()
    runs: list[list[int]] = [[]]
    tokens = 0
    for row in range(n):
        new_prompt = not share_prompt or not runs[-1] or prompt_of[runs[-1][-1]] != prompt_of[row]
        cost = lengths[row] + (prompt_len[prompt_of[row]] if new_prompt else 0)
        if runs[-1] and tokens + cost > max_tokens and trajectory_of[runs[-1][-1]] != trajectory_of[row]:
            runs.append([])
            cost, tokens = lengths[row] + prompt_len[prompt_of[row]], 0
        runs[-1].append(row)
        tokens += cost
    return [_micro_batch(rollout, loss_mask, torch.tensor(run)) for run in runs if run]


def _micro_batch(rollout: Rollout, loss_mask: torch.Tensor, rows: torch.Tensor) -> MicroBatch:
    of = rollout.prompt_of_rows[rows]
    first, last = int(of[0]), int(of[-1])
    prompts = torch.arange(first, last + 1)
    lp = int(rollout.prompt_mask[prompts].sum(-1).max())
    lc = max(1, int(rollout.lengths[rows].max()))
    return MicroBatch(
        rows=rows,
        prompt_ids=rollout.prompt_ids[prompts, -lp:],
        prompt_mask=rollout.prompt_mask[prompts, -lp:],
        row_prompt=of - first,
        completion_ids=rollout.completion_ids[rows, :lc],
        completion_mask=rollout.completion_mask[rows, :lc],
        loss_mask=loss_mask[rows, :lc],
        support_floors=None if rollout.support_floors is None else rollout.support_floors[rows, :lc],
        sequences=None if rollout.row_trajectory is None else
        torch.unique(rollout.trajectory_of_rows[rows], return_inverse=True)[1],
    )


def batch_logprobs(policy: Policy, rollout: Rollout, size: int, temperature: float,
                   reference: bool = False) -> torch.Tensor:
    """[N, Lc] log-probabilities of every completion token under π_θ (or π_ref, `reference`), without gradients
    (a sharded model: as many passes as the busiest rank's, Policy.equal_counts)."""
    return batch_stats(policy, rollout, size, temperature, reference)[0]


@torch.no_grad()
def batch_stats(policy: Policy, rollout: Rollout, size: int, temperature: float,
                reference: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """([N, Lc] log-probabilities, [N, Lc] entropies) of every completion position, as batch_logprobs."""
    out, entropy = torch.zeros(rollout.completion_ids.shape), torch.zeros(rollout.completion_ids.shape)
    real = micro_batches(rollout, rollout.completion_mask, size, policy.share_prompt(reference))
    forward = policy.reference_logprobs if reference else policy.logprobs
    for i, mb in enumerate(policy.equal_counts(real)):
        stats = forward(mb, temperature)
        if i == 0:  # fp32 (or the forward's own precision, when finer: fp64 in the exact tests)
            dtype = torch.promote_types(torch.float32, stats.logprobs.dtype)
            out, entropy = out.to(dtype), entropy.to(dtype)
        if i < len(real):
            lp = stats.logprobs.cpu()
            out[mb.rows, : lp.shape[1]] = lp
            entropy[mb.rows, : lp.shape[1]] = stats.entropy.cpu().to(entropy)
    return out, entropy


def make_batch(
    scored: ScoredRollout,
    advantages: torch.Tensor,
    *,
    policy: Policy,
    algo: AlgorithmConfig,
    micro_batch_tokens: int,
    temperature: float,
    stale: bool = False,
    kl_penalty: bool = True,
) -> TrainBatch:
    """Attach what the ratio and the KL need: log π_old (only when μ > 1) and log π_ref (only when β > 0).

    With μ = 1, π_old is the policy of the same forward pass (DeepSeekMath's Algorithm 1 takes one
    update per batch): the loss uses its detached log-probs, the ratio is exactly 1, and no extra pass
    is spent. A `stale` batch, sampled with older weights than the policy's (rlvr.rl.ahead), has the
    sampler's own log-probs as π_old: the ratio is then π_θ over the policy that sampled it, clipped as PPO
    clips an off-policy batch (Schulman et al. 2017). `loss_mask` is the completion mask (the model's own
    tokens only, when the rollout says which) without unscored rows, and without truncated rows under
    `mask_truncated` (DAPO; every row of a truncated trajectory). Without `kl_penalty` (PPO: the KL is in its
    token rewards) there is no log π_ref and the loss has no KL term.
    """
    rollout = scored.rollout
    # only the policy's own tokens carry a loss and a KL term (a multi-turn rollout's environment tokens do not)
    loss_mask = (rollout.model_mask if rollout.model_mask is not None else rollout.completion_mask).clone()
    if algo.mask_truncated:  # (every row of a truncated trajectory: a harness trajectory's last row says)
        loss_mask[torch.tensor(completion_truncated(rollout))[rollout.trajectory_of_rows]] = False
    # unscored completions (rlvr.rewards.batch.unscored), every row of theirs
    loss_mask[scored.rewards.isnan().view(-1)[rollout.trajectory_of_rows]] = False
    old, entropy_mask = None, None
    if algo.top_entropy_quantile < 1:  # (the entropies under π_old: one more pass when μ = 1)
        logprobs, entropy = batch_stats(policy, rollout, micro_batch_tokens, temperature)
        pool = torch.cat(gather_across(entropy[loss_mask], policy.world))  # (the whole batch's, every rank's)
        entropy_mask = high_entropy_tokens(entropy, loss_mask, algo.top_entropy_quantile, pool)
        old = logprobs if algo.updates_per_batch > 1 else None
    elif algo.updates_per_batch > 1:
        old = batch_logprobs(policy, rollout, micro_batch_tokens, temperature)
    if stale:
        old = rollout.sampling_logprobs
    ref = (batch_logprobs(policy, rollout, micro_batch_tokens, temperature, reference=True)
           if kl_penalty and policy.reference is not None and algo.beta > 0 else None)
    return TrainBatch(scored=scored, advantages=advantages, old_logprobs=old, ref_logprobs=ref, loss_mask=loss_mask,
                      entropy_mask=entropy_mask)
