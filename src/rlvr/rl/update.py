"""The policy update: the clipped surrogate plus β·KL (DeepSeekMath Eq. 3), one optimizer step per call.

    TrainBatch ─micro-batches─▶ log π_θ ─grpo_loss─▶ backward (accumulated) ─▶ clip grad norm ─▶ AdamW step
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch

from rlvr.config import AlgorithmConfig
from rlvr.correction import NO_SUMS, corrected_weights, correction_stats, correction_sums, log_weights
from rlvr.distributed.world import World, max_across, sum_across
from rlvr.kl import kl_estimate
from rlvr.losses import aggregate_loss
from rlvr.records import TrainBatch
from rlvr.rl.batch import MicroBatch, micro_batches
from rlvr.rl.objective import clip_shares, policy_term
from rlvr.run.policy import Policy


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    algo: AlgorithmConfig,
    *,
    num_sequences: int,
    num_tokens: int,
    constant: float,
    weights: torch.Tensor | None = None,
    row_tokens: torch.Tensor | None = None,
    sequences: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(scalar loss, per-token KL or None) of rows [m, T]: per token w·ℓ + β·KL(π_θ‖π_ref), aggregated with
    the whole batch's counts so that micro-batch losses add up to the batch's loss (rlvr.losses). ℓ = the
    policy-gradient term `algorithm.policy_loss` names (rlvr.rl.objective; `clip`: −min(ρÂ, clip(ρ, 1−ε_low,
    1+ε_high)Â)); w = the rollout correction's importance weights (rlvr.correction) times the entropy mask
    (`top_entropy_quantile`), 1 if None; `row_tokens` and `sequences`: each row's sequence length and sequence
    (rows numbered within these) when a sequence spans rows."""
    per_token = policy_term(algo, logprobs, old_logprobs, advantages, mask, sequences)
    if weights is not None:
        per_token = per_token * weights
    kl = None
    if ref_logprobs is not None:
        kl = kl_estimate(logprobs, ref_logprobs, algo.kl_estimator, old_logprobs)
        per_token = per_token + algo.beta * kl
    loss = aggregate_loss(per_token, mask, algo.loss_aggregation, num_sequences=num_sequences, num_tokens=num_tokens,
                          constant=constant, row_tokens=row_tokens)
    return loss, kl


@dataclass(frozen=True)
class MicroLoss:
    """What one micro-batch contributes to the step: its share of the loss and what the statistics read."""

    loss: torch.Tensor  # scalar: the micro-batch's share of the batch loss (the shares add up to it)
    kl: torch.Tensor | None  # [m, lc] per-token KL estimate, None when β = 0
    old_logprobs: torch.Tensor  # [m, lc] log π_old (the detached log π_θ when μ = 1)
    advantages: torch.Tensor  # [m, lc]
    mask: torch.Tensor  # [m, lc] the trained tokens
    sampling_logprobs: torch.Tensor  # [m, lc] the sampler's log-probs of the same tokens


def batch_counts(batch: TrainBatch, world: World) -> tuple[int, int]:
    """(sequences, tokens) the batch trains on, over every rank: the normalisers of sequence_mean and
    token_mean, so that the micro-batches' (and the ranks') losses add up to the batch's (at least 1 each)."""
    per_sequence = trajectory_tokens(batch)
    sequences = (batch.loss_mask.sum(-1) > 0).sum() if per_sequence is None else (per_sequence[1] > 0).sum()
    local = [float(sequences), float(batch.loss_mask.sum())]
    num_sequences, num_tokens = (max(1, int(n)) for n in sum_across(local, world))
    return num_sequences, num_tokens


def trajectory_tokens(batch: TrainBatch) -> tuple[torch.Tensor, torch.Tensor] | None:
    """([N'] each row's trajectory's trained tokens, [N] each trajectory's) when a trajectory spans several rows
    (rlvr.harness), so that it counts once; None when every row is a trajectory of its own."""
    rollout = batch.rollout
    if rollout.row_trajectory is None:
        return None
    of = rollout.trajectory_of_rows
    total = torch.zeros(batch.scored.rewards.numel()).index_add_(0, of, batch.loss_mask.sum(-1).float())
    return total[of], total


def micro_batch_loss(batch: TrainBatch, mb: MicroBatch, logprobs: torch.Tensor, algo: AlgorithmConfig, *,
                     counts: tuple[int, int], max_new_tokens: int,
                     sums: dict[str, float] | None = None) -> MicroLoss:
    """The loss of micro-batch `mb` of `batch`, whose log π_θ [m, lc] (with gradients) are `logprobs`: the
    batch's log π_old, log π_ref and advantages for its rows, its loss mask (empty in the padding passes of
    FSDP, Policy.equal_counts), the per-token weights (the rollout correction's, when `sums` collects its
    statistics, times the entropy mask), and `grpo_loss` with the batch's `counts` (batch_counts) and the
    constant normaliser (algorithm.loss_constant, else max_new_tokens). What the step runs for each
    micro-batch, and what tests/objectives proves against the papers' gradients."""
    rows, lc = mb.rows, logprobs.shape[1]
    mask = mb.loss_mask.to(logprobs.device)
    old = logprobs.detach() if batch.old_logprobs is None else batch.old_logprobs[rows, :lc].to(logprobs)
    ref = None if batch.ref_logprobs is None else batch.ref_logprobs[rows, :lc].to(logprobs)
    advantages = batch.advantages[rows, :lc].to(logprobs)
    sampled = batch.rollout.sampling_logprobs[rows, :lc].to(logprobs)
    weights = _token_weights(batch, rows, old, sampled, mask, algo, sums, mb.sequences)
    num_sequences, num_tokens = counts
    per_sequence = trajectory_tokens(batch)
    row_tokens = None if per_sequence is None else per_sequence[0][rows].to(logprobs)
    loss, kl = grpo_loss(logprobs, old, ref, advantages, mask, algo, num_sequences=num_sequences,
                         num_tokens=num_tokens, constant=algo.loss_constant or max_new_tokens, weights=weights,
                         row_tokens=row_tokens, sequences=mb.sequences)
    return MicroLoss(loss, kl, old, advantages, mask, sampled)


def policy_update(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    batch: TrainBatch,
    *,
    algo: AlgorithmConfig,
    micro_batch_tokens: int,
    temperature: float,
    max_grad_norm: float,
    max_new_tokens: int,
) -> dict[str, float]:
    """One optimizer step on the whole batch, gradients accumulated over micro-batches (each one's loss:
    `micro_batch_loss`); returns its statistics.

    Data-parallel (the policy on several ranks, each holding whole groups of the global batch): the loss is
    normalised by the global token and sequence counts and multiplied by the world size, since DDP and FSDP
    average gradients, so the step equals the single-process step on the global batch. Gradients are
    all-reduced once, on each rank's last micro-batch (Policy.accumulating); under FSDP every rank runs as
    many micro-batches as the busiest (Policy.equal_counts). The statistics are sums over all ranks, with
    `sampler/logp_abs_diff_{mean,max}`: how far the trained tokens' log-probs under the weights they were
    sampled with (this update's forward, on the first of μ updates) are from the sampler's own, and the rollout
    correction's statistics (algorithm.rollout_correction, rlvr.correction)."""
    world = policy.world
    counts = batch_counts(batch, world)
    num_tokens = counts[1]
    totals = dict.fromkeys(("loss", "kl", "clip_low_fraction", "clip_high_fraction", "entropy",
                            "sampler/logp_abs_diff_mean"), 0.0)
    largest, correcting, sums = 0.0, algo.rollout_correction.applied != "none", dict(NO_SUMS)  # (every key, every rank)
    optimizer.zero_grad(set_to_none=True)
    runs = policy.equal_counts(micro_batches(batch.rollout, batch.loss_mask, micro_batch_tokens,
                                             policy.share_prompt()))
    for i, mb in enumerate(runs):
        with policy.accumulating(last=i == len(runs) - 1):
            stats = policy.logprobs(mb, temperature)
            part = micro_batch_loss(batch, mb, stats.logprobs, algo, counts=counts,
                                    max_new_tokens=max_new_tokens, sums=sums if correcting else None)
            (part.loss * world.size).backward()  # type: ignore[no-untyped-call]
        mask, old = part.mask, part.old_logprobs
        low, high = clip_shares(algo, stats.logprobs, old, part.advantages, mask, mb.sequences)
        weight = float(mask.sum()) / num_tokens
        totals["loss"] += float(part.loss.detach())
        totals["kl"] += float((part.kl.detach() * mask).sum()) / num_tokens if part.kl is not None else 0.0
        totals["clip_low_fraction"] += low * weight
        totals["clip_high_fraction"] += high * weight
        totals["entropy"] += float((stats.entropy * mask).sum()) / num_tokens
        gap = (stats.logprobs.detach() - part.sampling_logprobs).abs() * mask
        totals["sampler/logp_abs_diff_mean"] += float(gap.sum()) / num_tokens
        largest = max(largest, float(gap.max()))  # (a micro-batch is never empty: rlvr.rl.batch)
    totals = dict(zip(totals, sum_across(list(totals.values()), world)))
    totals["sampler/logp_abs_diff_max"] = float(max_across([largest], world)[0])
    if correcting:
        totals |= _correction_metrics(sums, algo, world)
    return totals | _optimizer_step(policy, optimizer, scheduler, batch, max_grad_norm)


def _optimizer_step(policy: Policy, optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LRScheduler,
                    batch: TrainBatch, max_grad_norm: float) -> dict[str, float]:
    """The step on the accumulated gradients, except the one step that has none to take: before the first step
    π_θ is π_ref, and with every advantage zero (on every rank) the exact gradient is zero (the surrogate times
    0, the KL at its minimum). What backward measured then is float noise between the policy's and the
    reference's forward passes, which Adam would normalise into a full-size step in a random direction; the
    gradients are dropped instead (AdamW skips a parameter without one; the schedule still advances), so a run
    without any reward signal stays where it started (`update/skipped`)."""
    skipped = not optimizer.state and not sum_across([float(bool(batch.advantages.any()))], policy.world)[0]
    if skipped:
        optimizer.zero_grad(set_to_none=True)
    stats = policy.optimizer_step(optimizer, scheduler, max_grad_norm)
    if not math.isfinite(stats["grad_norm"]) and not skipped:
        _say_lost_step(stats["grad_norm"], policy.world)
    return {"update/skipped": float(skipped)} | stats


_said: set[str] = set()  # what this process has said once already


def _say_lost_step(norm: float, world: World) -> None:
    """A gradient norm that is not finite leaves the step with nothing (clipping scales an infinite gradient to 0;
    a NaN one moves every weight to NaN): said once, on rank 0, rather than logged as `grad_norm` alone."""
    if "lost" in _said or not world.is_main:
        return
    _said.add("lost")
    print(f"rlvr: the gradient norm is {norm} (advantages or a loss too large, or not numbers): the update cannot "
          "use it; check algorithm.advantage_fn / policy_loss, or the rewards' scale (said once)", file=sys.stderr)


def _token_weights(batch: TrainBatch, rows: torch.Tensor, old: torch.Tensor, sampled: torch.Tensor,
                   mask: torch.Tensor, algo: AlgorithmConfig, sums: dict[str, float] | None,
                   sequences: torch.Tensor | None = None) -> torch.Tensor | None:
    """What multiplies each token's policy-gradient term, or None: the rollout correction's π_old / π_sampler
    (when `sums` collects its statistics) times the entropy mask (the high-entropy tokens only)."""
    weights = _correct(old, sampled, mask, algo, sums, sequences) if sums is not None else None
    if batch.entropy_mask is not None:
        keep = batch.entropy_mask[rows, : old.shape[1]].to(old)
        weights = keep if weights is None else weights * keep
    return weights


def _correct(old: torch.Tensor, sampled: torch.Tensor, mask: torch.Tensor, algo: AlgorithmConfig,
             sums: dict[str, float], sequences: torch.Tensor | None = None) -> torch.Tensor:
    """The rollout correction's weights of a micro-batch (rlvr.correction), their statistics added to `sums`."""
    rc = algo.rollout_correction
    weights = corrected_weights(log_weights(old, sampled, mask, rc.applied, sequences), mask, rc.mode, rc.threshold)
    for key, value in correction_sums(old, sampled, mask, rc.applied, weights, sequences).items():
        sums[key] = max(sums[key], value) if key.endswith("_max") else sums[key] + value
    return weights


def _correction_metrics(sums: dict[str, float], algo: AlgorithmConfig, world: World) -> dict[str, float]:
    """The step's correction statistics from every rank's sums."""
    added, maxed = [k for k in NO_SUMS if not k.endswith("_max")], [k for k in NO_SUMS if k.endswith("_max")]
    total = dict(zip(added, sum_across([sums[k] for k in added], world))) | dict(
        zip(maxed, max_across([sums[k] for k in maxed], world)))
    return correction_stats(total, algo.rollout_correction.mode)
