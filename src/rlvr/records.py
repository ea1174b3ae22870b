"""Typed records passed between the stages of a GRPO step.

    Example ─▶ Rollout ─▶ ScoredRollout ─▶ TrainBatch
    (data/)    (rollout)  (rewards/)       (advantages + old/ref log-probs)

Shapes use P = prompts in the step, G = group size, N = P·G completions,
Lp = longest prompt, Lc = longest completion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tensors appear in annotations only: reading the records' types costs no torch import
    import torch

Messages = list[dict[str, str]]
Prompt = str | Messages  # a prompt as the data gives it: text, or chat messages


@dataclass(frozen=True)
class Scoring:
    """How a kind of row is scored: the rewards that train on it when the config names none, and the
    two verifiers that measure its accuracy (names of rlvr.rewards built-ins)."""

    rewards: tuple[tuple[str, float], ...]  # (reward, weight): r = Σ weight · reward
    strict: str  # accuracy, the answer read only where the prompt asked for it
    lenient: str  # accuracy, the answer read wherever it can be found
    extraction: tuple[str, str]  # the strict and the lenient rule in words, recorded with evaluation results


@dataclass(frozen=True)
class Example:
    """One dataset row.

    `prompt` is plain text or a list of chat messages; `columns` holds every other field of the
    row (e.g. `answer`, `numbers`, `target`) and reaches reward functions as keyword arguments.
    """

    prompt: str | Messages
    columns: dict[str, Any] = field(default_factory=dict)
    index: int = 0  # position in its source, for resumable data order


@dataclass(frozen=True)
class Rollout:
    """G completions for each of P prompts, sampled from the policy (rollout.py).

    Completions of prompt p occupy rows p·G … p·G + G − 1. A harness rollout (rlvr.harness) may give one
    trajectory several rows (its agent rewrote its context between turns): `row_trajectory` then says which
    of the N = P·G trajectories each of the N' rows belongs to, `row_prompt` which row of `prompt_ids` it
    continues; what is said of a completion below is said of a row, except `completions`, `env_rewards`,
    `env_info` and `transcripts`, which are per trajectory, and the rewards, which are [P, G] as always.
    """

    examples: list[Example]  # P
    group_size: int  # G
    prompt_ids: torch.Tensor  # [P, Lp] long, left-padded
    prompt_mask: torch.Tensor  # [P, Lp] bool, True = real prompt token
    completion_ids: torch.Tensor  # [N, Lc] long, right-padded
    completion_mask: torch.Tensor  # [N, Lc] bool, True = sampled token (EOS included)
    sampling_logprobs: torch.Tensor  # [N, Lc] float, log-prob of each sampled token where it was drawn, 0 at padding
    truncated: torch.Tensor  # [N] bool, True = hit max_new_tokens before EOS
    completions: list[str]  # N decoded completion texts (special tokens removed)
    # [N, Lc] bool, True = written by the policy; in a multi-turn rollout (rlvr.envs) the environment's
    # tokens are context, outside it. None = every completion token (one-turn rollouts)
    model_mask: torch.Tensor | None = None
    # multi-turn rollouts only (rlvr.envs): per completion, the environment's reward (None = it left the
    # scoring to the verifiers), what happened (turns, tool calls, ...) and the conversation after the prompt
    env_rewards: list[float | None] | None = None
    env_info: list[dict[str, float]] | None = None
    transcripts: list[list[dict[str, str]]] | None = None
    # [N, Lc] float: where top-k / top-p cut each position's temperature-scaled logits (kept: at or above it;
    # the support the token was drawn from, which the trainer's log-probs renormalise over: rlvr.logprobs);
    # −inf where the whole vocabulary was kept. None = nothing was cut anywhere
    support_floors: torch.Tensor | None = None
    version: int = 0  # the policy version (its step count) of the weights that sampled it
    row_trajectory: torch.Tensor | None = None  # [N'] long, ascending: row i is trajectory i when None
    row_prompt: torch.Tensor | None = None  # [N'] long, ascending: row i continues prompt i // G when None
    # multi-turn rollouts only: per trajectory, the rewards reported for its turns ({turn number: reward}; turns
    # numbered in the order they were served), and [N', Lc] the turn number of each model token (−1 elsewhere)
    turn_rewards: list[dict[int, float]] | None = None
    row_turns: torch.Tensor | None = None

    @property
    def num_prompts(self) -> int:
        return len(self.examples)

    @property
    def trajectory_of_rows(self) -> torch.Tensor:
        """[N'] the trajectory (p·G + j) each row belongs to."""
        import torch

        n = self.completion_ids.shape[0]
        return torch.arange(n) if self.row_trajectory is None else self.row_trajectory

    @property
    def prompt_of_rows(self) -> torch.Tensor:
        """[N'] the row of `prompt_ids` each row continues."""
        import torch

        n = self.completion_ids.shape[0]
        return torch.arange(n) // self.group_size if self.row_prompt is None else self.row_prompt

    @property
    def lengths(self) -> torch.Tensor:
        """[N] number of sampled tokens in each completion."""
        return self.completion_mask.sum(-1)


@dataclass(frozen=True)
class ScoredRollout:
    """A rollout with its rewards (rewards/).

    Rewards and advantages are different things: advantages live in TrainBatch.
    """

    rollout: Rollout
    rewards: torch.Tensor  # [P, G] weighted total reward
    reward_components: dict[str, torch.Tensor]  # name -> [P, G] unweighted, NaN where not applicable
    reward_seconds: dict[str, float]  # name -> wall time spent in that reward function
    # what the rewards logged through TRL's hooks (rlvr.rewards.trainer_hooks): log_metric's values by name, in
    # call order; log_extra's columns, one value per completion in row order (None where none was logged)
    logged_metrics: dict[str, list[float]] = field(default_factory=dict)
    extra_columns: dict[str, list[Any]] = field(default_factory=dict)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (a batch sampled ahead, kept in a checkpoint): one from before the hooks has none logged."""
        self.__dict__.update({"logged_metrics": {}, "extra_columns": {}, **state})


@dataclass(frozen=True)
class TrainBatch:
    """Everything the policy update needs (rl/update.py)."""

    scored: ScoredRollout
    advantages: torch.Tensor  # [N, Lc] per token: constant along a completion under outcome supervision
    old_logprobs: torch.Tensor | None  # [N, Lc] log π_old; None when μ = 1 (π_old = π_θ, detached)
    ref_logprobs: torch.Tensor | None  # [N, Lc] log π_ref, None when β = 0
    loss_mask: torch.Tensor  # [N, Lc] bool, completion_mask minus masked (e.g. truncated) rows
    entropy_mask: torch.Tensor | None = None  # [N, Lc] bool: the tokens the policy-gradient term trains on
    # (algorithm.top_entropy_quantile < 1: the batch's highest-entropy tokens); None = every token

    @property
    def rollout(self) -> Rollout:
        return self.scored.rollout


@dataclass(frozen=True)
class Evaluation:
    """A recipe's held-out measurement of its weights: `result` is what a run keeps (trainer.pt's "before",
    summary.json, best.json: JSON values), `metrics` what is logged, `line` what the console shows."""

    result: dict[str, Any]
    metrics: dict[str, float]
    line: str
