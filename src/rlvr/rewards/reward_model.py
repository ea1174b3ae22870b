"""A trained reward model as a reward: outcome scores, process (per-step) scores, and the built-in
GRPO reward `reward_model`.

    scorer = RewardModelScorer.from_path("runs/reward_model")
    scorer.score(prompts, completions)        # raw Bradley–Terry scores
    scorer.normalised(prompts, completions)   # (r − mean) / (std + ε), the stats of training

    prm = ProcessRewardScorer("runs/prm")
    prm.step_probabilities(prompts, completions)  # [[p_1, …, p_K], …], p_i = σ(score of prefix ending at step i)
    prm.score(prompts, completions)               # Π_i p_i: the probability that every step is right

    rewards:                                  # in a GRPO config
      - name: reward_model
        params: {path: runs/reward_model}

The reward is the normalised score, so it sits on a scale comparable to a 0/1 verifier's and a
weight means the same for it as for the others. Each model is loaded once per (path, device, batch
size) and kept for the life of the process. Prompts are text or chat messages; completions are text
or TRL's chat form (the last message's content is scored).

torch and transformers (rlvr.models.reward_model) are imported on first use, so loading the
built-in rewards stays cheap for commands that never score with a model.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlvr.errors import UserError
from rlvr.records import Prompt
from rlvr.rewards.text import completion_text

if TYPE_CHECKING:
    import torch

    from rlvr.models.reward_model import ScoreStats


class RewardModelScorer:
    """A one-output classifier in eval mode with its tokenizer and training statistics."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, stats: ScoreStats, *, batch_size: int = 16):
        self.model, self.tokenizer, self.stats, self.batch_size = model.eval(), tokenizer, stats, batch_size

    @classmethod
    def from_path(cls, path: str | Path, *, batch_size: int = 16, device: str | None = None) -> RewardModelScorer:
        """Load the reward model at `path`: a run directory of `rlvr rm`, a checkpoint, or its model/ folder.

        `device` defaults to the GPU when there is one.
        """
        import torch

        from rlvr.models.reward_model import find_reward_model, load_reward_model, read_stats

        model_dir = find_reward_model(path)
        model, tokenizer = load_reward_model(str(model_dir))  # (trained with LoRA: its adapters merged)
        model.requires_grad_(False)
        model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        return cls(model, tokenizer, read_stats(model_dir), batch_size=batch_size)

    def score(self, prompts: Sequence[Prompt], completions: Sequence[Any]) -> list[float]:
        """The raw score of each (prompt, completion)."""
        from rlvr.models.reward_model import score_texts

        texts = [completion_text(c) for c in completions]
        return score_texts(
            self.model, self.tokenizer, list(prompts), texts, max_length=self.stats.max_length,
            batch_size=self.batch_size,
        )

    def normalised(self, prompts: Sequence[Prompt], completions: Sequence[Any]) -> list[float]:
        """(score − mean) / (std + ε), with the mean and std of the training completions' scores."""
        from rlvr.models.reward_model import normalise

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
    Π_i p_i, the probability that every step is (the process reward of Lightman et al. 2023,
    "Let's Verify Step by Step")."""

    def __init__(self, path: str | Path | RewardModelScorer, step_separator: str = "\n\n", *, batch_size: int = 16,
                 device: str | None = None):
        self.scorer = (path if isinstance(path, RewardModelScorer)
                       else RewardModelScorer.from_path(path, batch_size=batch_size, device=device))
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


_SCORERS: dict[tuple[str, str | None, int], RewardModelScorer] = {}
_LOCK = threading.Lock()  # built-in rewards may be called from a thread pool (rlvr.rewards.combine)


def reward_model(
    prompts: list[Any],
    completions: list[Any],
    path: str | None = None,
    batch_size: int = 16,
    device: str | None = None,
    **kwargs: Any,
) -> list[float]:
    """Normalised reward-model scores of the completions (text or chat messages) for their prompts.

    `path` is the run directory of `rlvr rm`, one of its checkpoints, or their model/ folder;
    `device` defaults to the GPU when there is one.
    """
    if path is None:
        raise UserError("reward 'reward_model' needs the model: params: {path: RUN_DIR} (a run directory of `rlvr rm`)")
    if prompts is None or len(prompts) != len(completions):
        raise UserError("reward 'reward_model' needs the prompts the completions answer "
                        "(call it with prompts=..., as TRL does)")
    return cached_scorer(path, device=device, batch_size=batch_size).normalised(prompts, completions)


def cached_scorer(path: str | Path, *, device: str | None = None, batch_size: int = 16) -> RewardModelScorer:
    """The scorer for `path`, loaded on first use (one per resolved model directory, device and batch size)."""
    from rlvr.models.reward_model import find_reward_model

    key = (str(find_reward_model(path).resolve()), device, batch_size)
    with _LOCK:
        if key not in _SCORERS:
            _SCORERS[key] = RewardModelScorer.from_path(key[0], batch_size=batch_size, device=device)
        return _SCORERS[key]
