"""Scoring completions with a trained reward model: outcome scores and process (per-step) scores.

    scorer = RewardModelScorer.from_path("runs/reward_model")
    scorer.score(prompts, completions)        # raw Bradley–Terry scores
    scorer.normalised(prompts, completions)   # (r − mean) / (std + ε), the stats of training

    prm = ProcessRewardScorer("runs/prm")
    prm.step_probabilities(prompts, completions)  # [[p_1, …, p_K], …], p_i = σ(score of prefix ending at step i)
    prm.score(prompts, completions)               # Π_i p_i (seed 000's process reward)

Prompts are text or chat messages; completions are text or TRL's chat form (the last message's
content is scored).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from rlvr.models import load_pretrained
from rlvr.reward_models.model import score_texts
from rlvr.reward_models.pairs import Prompt
from rlvr.reward_models.stats import ScoreStats, find_reward_model, normalise, read_stats
from rlvr.rewards.text import completion_text


class RewardModelScorer:
    """A one-output classifier in eval mode with its tokenizer and training statistics."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, stats: ScoreStats, *, batch_size: int = 16):
        self.model, self.tokenizer, self.stats, self.batch_size = model.eval(), tokenizer, stats, batch_size

    @classmethod
    def from_path(cls, path: str | Path, *, batch_size: int = 16, device: str | None = None) -> "RewardModelScorer":
        """Load the reward model at `path`: a run directory of `rlvr rm`, a checkpoint, or its model/ folder.

        `device` defaults to the GPU when there is one.
        """
        from transformers import AutoModelForSequenceClassification

        model_dir = find_reward_model(path)
        model, tokenizer = load_pretrained(str(model_dir), AutoModelForSequenceClassification, num_labels=1)
        model.config.pad_token_id = tokenizer.pad_token_id
        model.requires_grad_(False)
        model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        return cls(model, tokenizer, read_stats(model_dir), batch_size=batch_size)

    def score(self, prompts: Sequence[Prompt], completions: Sequence[Any]) -> list[float]:
        """The raw score of each (prompt, completion)."""
        texts = [completion_text(c) for c in completions]
        return score_texts(
            self.model, self.tokenizer, list(prompts), texts, max_length=self.stats.max_length, batch_size=self.batch_size
        )

    def normalised(self, prompts: Sequence[Prompt], completions: Sequence[Any]) -> list[float]:
        """(score − mean) / (std + ε), with the mean and std of the training completions' scores."""
        return normalise(self.score(prompts, completions), self.stats)


def split_steps(text: str, separator: str = "\n\n") -> list[str]:
    """The steps of a completion: the pieces between separators, blank pieces dropped.

    >>> split_steps("x = 2\\n\\ny = x + 1\\n\\n\\n\\nso y = 3")
    ['x = 2', 'y = x + 1', 'so y = 3']
    >>> split_steps("one line"), split_steps("  \\n\\n ")
    (['one line'], [])
    >>> split_steps("a; b;", separator=";")
    ['a', ' b']
    """
    if not separator:
        raise ValueError("the step separator must be a non-empty string")
    return [piece for piece in text.split(separator) if piece.strip()]


def step_prefixes(text: str, separator: str = "\n\n") -> list[str]:
    """The text up to the end of each step, steps joined by `separator`; a completion with no
    step (empty or blank) is one empty step, so it is still scored.

    >>> step_prefixes("a\\n\\nb\\n\\nc")
    ['a', 'a\\n\\nb', 'a\\n\\nb\\n\\nc']
    >>> step_prefixes("")
    ['']
    """
    steps = split_steps(text, separator) or [""]
    return [separator.join(steps[: i + 1]) for i in range(len(steps))]


class ProcessRewardScorer:
    """A process reward model: the classifier scores the prefix ending at each step boundary;
    p_i = σ(score_i) is the probability that step i is correct, and a completion's score is
    Π_i p_i, the probability that every step is (seed 000's process reward)."""

    def __init__(self, path: str | Path | RewardModelScorer, step_separator: str = "\n\n", *, batch_size: int = 16, device: str | None = None):
        self.scorer = path if isinstance(path, RewardModelScorer) else RewardModelScorer.from_path(path, batch_size=batch_size, device=device)
        self.step_separator = step_separator

    def step_probabilities(self, prompts: Sequence[Prompt], completions: Sequence[Any]) -> list[list[float]]:
        """p_i = σ(score of the prompt and the completion up to step i), for every step of every
        completion; all prefixes of the batch are scored together."""
        prefixes = [step_prefixes(completion_text(c), self.step_separator) for c in completions]
        flat_prompts = [p for p, steps in zip(prompts, prefixes, strict=True) for _ in steps]
        scores = iter(self.scorer.score(flat_prompts, [s for steps in prefixes for s in steps]))
        return [[_sigmoid(next(scores)) for _ in steps] for steps in prefixes]

    def score(self, prompts: Sequence[Prompt], completions: Sequence[Any]) -> list[float]:
        """Π_i p_i for each completion."""
        return [math.prod(ps) for ps in self.step_probabilities(prompts, completions)]


def _sigmoid(x: float) -> float:
    # the two branches keep exp() from overflowing for large |x|
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
