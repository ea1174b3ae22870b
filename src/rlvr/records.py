"""Typed records passed between the stages of a GRPO step.

    Example ─▶ Rollout ─▶ ScoredRollout ─▶ TrainBatch
    (data/)    (rollout)  (rewards/)       (advantages + old/ref log-probs)

Shapes use P = prompts in the step, G = group size, N = P·G completions,
Lp = longest prompt, Lc = longest completion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Example:
    """One dataset row.

    `prompt` is plain text or a list of chat messages; `columns` holds every other field of the
    row (e.g. `answer`, `numbers`, `target`) and reaches reward functions as keyword arguments.
    """

    prompt: str | Messages
    columns: dict[str, Any] = field(default_factory=dict)
    index: int = 0  # position in its source, for resumable data order


@dataclass
class Rollout:
    """G completions for each of P prompts, sampled from the policy (rollout.py).

    Completions of prompt p occupy rows p·G … p·G + G − 1.
    """

    examples: list[Example]  # P
    group_size: int  # G
    prompt_ids: torch.Tensor  # [P, Lp] long, left-padded
    prompt_mask: torch.Tensor  # [P, Lp] bool, True = real prompt token
    completion_ids: torch.Tensor  # [N, Lc] long, right-padded
    completion_mask: torch.Tensor  # [N, Lc] bool, True = sampled token (EOS included)
    sampling_logprobs: torch.Tensor  # [N, Lc] float, log π_old of each sampled token, 0 at padding
    truncated: torch.Tensor  # [N] bool, True = hit max_new_tokens before EOS
    completions: list[str]  # N decoded completion texts (special tokens removed)

    @property
    def num_prompts(self) -> int:
        return len(self.examples)

    @property
    def lengths(self) -> torch.Tensor:
        """[N] number of sampled tokens in each completion."""
        return self.completion_mask.sum(-1)


@dataclass
class ScoredRollout:
    """A rollout with its rewards (rewards/).

    Rewards and advantages are different things: advantages live in TrainBatch.
    """

    rollout: Rollout
    rewards: torch.Tensor  # [P, G] weighted total reward
    reward_components: dict[str, torch.Tensor]  # name -> [P, G] unweighted, NaN where not applicable
    reward_seconds: dict[str, float]  # name -> wall time spent in that reward function


@dataclass
class TrainBatch:
    """Everything the policy update needs (train/step.py)."""

    scored: ScoredRollout
    advantages: torch.Tensor  # [N] per completion (outcome) or [N, Lc] per token (process)
    old_logprobs: torch.Tensor | None  # [N, Lc] log π_old; None when μ = 1 (π_old = π_θ, detached)
    ref_logprobs: torch.Tensor | None  # [N, Lc] log π_ref, None when β = 0
    loss_mask: torch.Tensor  # [N, Lc] bool, completion_mask minus masked (e.g. truncated) rows

    @property
    def rollout(self) -> Rollout:
        return self.scored.rollout
