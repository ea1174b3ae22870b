"""The pieces of one GRPO step, each a function of typed records (used by train/trainer.py).

    Rollout ─score_rollout─▶ ScoredRollout ─make_batch─▶ TrainBatch ─policy_update─▶ stats
"""

from __future__ import annotations

import math
import queue
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch

from rlvr.advantages import group_advantages
from rlvr.config import AlgorithmConfig
from rlvr.kl import kl_estimate
from rlvr.logprobs import TokenStats, completion_logprobs
from rlvr.losses import aggregate_loss, clip_fractions, clipped_policy_loss
from rlvr.records import Example, Rollout, ScoredRollout, TrainBatch
from rlvr.rewards import RewardResult, RewardSpec, compute_rewards


def reward_inputs(examples: list[Example], group_size: int, texts: list[str], ids: list[list[int]]) -> dict:
    """TRL's keyword arguments for the completions of `examples` (G consecutive ones per example)."""
    prompts = [ex.prompt for ex in examples for _ in range(group_size)]
    completions: list = [
        [{"role": "assistant", "content": text}] if isinstance(prompt, list) else text
        for prompt, text in zip(prompts, texts)
    ]
    keys = sorted({k for ex in examples for k in ex.columns})
    columns = {k: [ex.columns.get(k) for ex in examples for _ in range(group_size)] for k in keys}
    return {"prompts": prompts, "completions": completions, "completion_ids": ids, "columns": columns}


def score_rollout(rollout: Rollout, specs: list[RewardSpec]) -> ScoredRollout:
    """Run every reward function on every completion, in one call per function."""
    ids = [row[mask].tolist() for row, mask in zip(rollout.completion_ids, rollout.completion_mask)]
    result = compute_rewards(specs, **reward_inputs(rollout.examples, rollout.group_size, rollout.completions, ids))
    return _scored(rollout, [result])


def sample_and_score(sample: Callable[..., Rollout], examples: list[Example], group_size: int, specs: list[RewardSpec]) -> ScoredRollout:
    """Overlap rewards with generation: decoding runs on a worker thread (torch releases the GIL)
    and this thread scores each group as soon as all its completions have finished.

    Reward functions stay on the calling thread (some rely on signal-based timeouts that only work
    there) and are called once per group rather than once per batch.
    """
    ready: queue.Queue = queue.Queue()
    results: dict[int, RewardResult] = {}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollout") as pool:
        future = pool.submit(sample, on_group_done=lambda p, texts, ids: ready.put((p, texts, ids)))
        while len(results) < len(examples):
            try:
                p, texts, ids = ready.get(timeout=0.05)
            except queue.Empty:
                if future.done() and future.exception() is not None:
                    raise future.exception()
                continue
            results[p] = compute_rewards(specs, **reward_inputs([examples[p]], group_size, texts, ids))
        rollout = future.result()
    return _scored(rollout, [results[p] for p in range(len(examples))])


def _scored(rollout: Rollout, parts: list[RewardResult]) -> ScoredRollout:
    """Assemble per-group (or whole-batch) reward results, in row order, into a ScoredRollout."""
    shape = (rollout.num_prompts, rollout.group_size)
    total = [t for part in parts for t in part.total]
    names = list(parts[0].components)
    components = {
        name: torch.tensor([math.nan if v is None else v for part in parts for v in part.components[name]], dtype=torch.float32).view(shape)
        for name in names
    }
    return ScoredRollout(
        rollout=rollout,
        rewards=torch.tensor(total, dtype=torch.float32).view(shape),
        reward_components=components,
        reward_seconds={name: sum(part.seconds[name] for part in parts) for name in names},
    )


def compute_advantages(rewards: torch.Tensor, algo: AlgorithmConfig) -> torch.Tensor:
    """[P, G] rewards -> [N] advantages, one per completion (outcome supervision)."""
    return group_advantages(
        rewards,
        baseline=algo.advantage_baseline,
        scale=algo.advantage_scale,
        std_estimator=algo.std_estimator,
        eps=algo.advantage_eps,
    ).reshape(-1)


@dataclass
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


def micro_batches(rollout: Rollout, loss_mask: torch.Tensor, max_tokens: int) -> list[MicroBatch]:
    """Split the N completions into runs of consecutive rows holding at most `max_tokens` real
    tokens (each prompt counted once, since it is computed once per micro-batch; see rlvr.logprobs).
    Consecutive rows keep a group's completions together; a row longer than the budget goes alone."""
    g, n = rollout.group_size, rollout.completion_ids.shape[0]
    prompt_len, lengths = rollout.prompt_mask.sum(-1).tolist(), rollout.lengths.tolist()
    runs: list[list[int]] = [[]]
    tokens = 0
    for row in range(n):
        cost = lengths[row] + (prompt_len[row // g] if not runs[-1] or runs[-1][-1] // g != row // g else 0)
        if runs[-1] and tokens + cost > max_tokens:
            runs.append([])
            cost, tokens = lengths[row] + prompt_len[row // g], 0
        runs[-1].append(row)
        tokens += cost
    return [_micro_batch(rollout, loss_mask, torch.tensor(run)) for run in runs if run]


def _micro_batch(rollout: Rollout, loss_mask: torch.Tensor, rows: torch.Tensor) -> MicroBatch:
    g = rollout.group_size
    first, last = int(rows[0]) // g, int(rows[-1]) // g
    prompts = torch.arange(first, last + 1)
    lp = int(rollout.prompt_mask[prompts].sum(-1).max())
    lc = max(1, int(rollout.lengths[rows].max()))
    return MicroBatch(
        rows=rows,
        prompt_ids=rollout.prompt_ids[prompts, -lp:],
        prompt_mask=rollout.prompt_mask[prompts, -lp:],
        row_prompt=rows // g - first,
        completion_ids=rollout.completion_ids[rows, :lc],
        completion_mask=rollout.completion_mask[rows, :lc],
        loss_mask=loss_mask[rows, :lc],
    )


def forward(model: torch.nn.Module, mb: MicroBatch, temperature: float) -> TokenStats:
    return completion_logprobs(
        model, mb.prompt_ids, mb.prompt_mask, mb.row_prompt, mb.completion_ids, mb.completion_mask, temperature
    )


@torch.no_grad()
def batch_logprobs(model: torch.nn.Module, rollout: Rollout, size: int, temperature: float) -> torch.Tensor:
    """[N, Lc] log-probabilities of every completion token under `model`, without gradients."""
    out = torch.zeros(rollout.completion_ids.shape)
    for mb in micro_batches(rollout, rollout.completion_mask, size):
        lp = forward(model, mb, temperature).logprobs.cpu()
        out[mb.rows, : lp.shape[1]] = lp
    return out


def make_batch(
    scored: ScoredRollout,
    advantages: torch.Tensor,
    *,
    policy: torch.nn.Module,
    reference: torch.nn.Module | None,
    algo: AlgorithmConfig,
    micro_batch_tokens: int,
    temperature: float,
) -> TrainBatch:
    """Attach what the ratio and the KL need: log π_old (only when μ > 1) and log π_ref (only when β > 0)."""
    rollout = scored.rollout
    loss_mask = rollout.completion_mask.clone()
    if algo.mask_truncated:
        loss_mask[rollout.truncated] = False
    old = batch_logprobs(policy, rollout, micro_batch_tokens, temperature) if algo.updates_per_batch > 1 else None
    ref = batch_logprobs(reference, rollout, micro_batch_tokens, temperature) if reference is not None and algo.beta > 0 else None
    return TrainBatch(scored=scored, advantages=advantages, old_logprobs=old, ref_logprobs=ref, loss_mask=loss_mask)


def policy_update(
    policy: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    batch: TrainBatch,
    *,
    algo: AlgorithmConfig,
    micro_batch_tokens: int,
    temperature: float,
    max_grad_norm: float,
    max_new_tokens: int,
    autocast: Callable[[], AbstractContextManager] = nullcontext,
) -> dict[str, float]:
    """One optimizer step on the whole batch: clipped surrogate + β·KL, gradients accumulated over
    micro-batches. `autocast` wraps each forward pass (reduced precision on a GPU, rlvr/devices.py)."""
    rollout = batch.rollout
    num_sequences = int((batch.loss_mask.sum(-1) > 0).sum().clamp(min=1))
    num_tokens = int(batch.loss_mask.sum().clamp(min=1))
    totals = {"loss": 0.0, "kl": 0.0, "clip_low_fraction": 0.0, "clip_high_fraction": 0.0, "entropy": 0.0}
    optimizer.zero_grad(set_to_none=True)
    for mb in micro_batches(rollout, batch.loss_mask, micro_batch_tokens):
        with autocast():
            stats = forward(policy, mb, temperature)
        lc = mb.completion_ids.shape[1]
        logprobs, mask = stats.logprobs, mb.loss_mask.to(stats.logprobs.device)
        old = logprobs.detach() if batch.old_logprobs is None else batch.old_logprobs[mb.rows, :lc].to(logprobs)
        advantages = batch.advantages[mb.rows].to(logprobs)
        if advantages.dim() == 2:  # per-token (process supervision): trimmed like the micro-batch
            advantages = advantages[:, :lc]
        per_token = clipped_policy_loss(logprobs, old, advantages, algo.clip_low, algo.clip_high)
        if batch.ref_logprobs is not None:
            kl = kl_estimate(logprobs, batch.ref_logprobs[mb.rows, :lc].to(logprobs), algo.kl_estimator)
            per_token = per_token + algo.beta * kl
            totals["kl"] += float((kl.detach() * mask).sum()) / num_tokens
        loss = aggregate_loss(
            per_token, mask, algo.loss_aggregation,
            num_sequences=num_sequences, num_tokens=num_tokens, constant=algo.loss_constant or max_new_tokens,
        )
        loss.backward()
        share = float(mask.sum()) / num_tokens
        low, high = clip_fractions(logprobs, old, advantages, mask, algo.clip_low, algo.clip_high)
        totals["loss"] += float(loss.detach())
        totals["clip_low_fraction"] += low * share
        totals["clip_high_fraction"] += high * share
        totals["entropy"] += float((stats.entropy * mask).sum()) / num_tokens
    params = [p for p in policy.parameters() if p.requires_grad]
    norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm if max_grad_norm > 0 else float("inf"))
    totals["grad_norm"] = float(norm)
    totals["lr"] = optimizer.param_groups[0]["lr"]
    optimizer.step()
    scheduler.step()
    return totals
