"""Process supervision in GRPO (DeepSeekMath §4.1.3, Shao et al. 2024).

A process reward model scores every step of every completion (steps are the pieces between
`algorithm.step_separator`); the step rewards of a group are normalised together and each token's
advantage is the sum of the normalised rewards of the steps ending at or after it
(`rlvr.advantages.process_advantages`). This module finds where each step ends in tokens.

    ScoredRollout ─PRM step probabilities─▶ step rewards ─token ends─▶ advantages [N, Lc]

Departure from the paper: the last step is taken to end at the completion's last token (the stop
token included), so no sampled token is left with a zero advantage for merely following the text.
"""

from __future__ import annotations

from typing import Any

import torch

from rlvr.advantages import process_advantages
from rlvr.records import ScoredRollout


def step_end_chars(text: str, separator: str) -> list[int]:
    """Character offsets where the non-blank steps of `text` end (one step ending at len(text) if none).

    >>> step_end_chars("a = 1\\n\\nb = 2\\n\\n\\n\\nso 3", "\\n\\n")
    [5, 12, 20]
    >>> step_end_chars("", "\\n\\n")
    [0]
    """
    ends, position = [], 0
    for piece in text.split(separator):
        if piece.strip():
            ends.append(position + len(piece))
        position += len(piece) + len(separator)
    return ends or [len(text)]


def token_ends(char_ends: list[int], prefix_lengths: list[int]) -> list[int]:
    """Step ends in tokens: the fewest tokens whose decoded text reaches each character end;
    the last step ends at the last token. `prefix_lengths[t]` = len(decode(tokens[: t + 1])).
    Steps that end inside the same token share that end (their rewards then reach the same tokens).

    >>> token_ends([5, 12, 20], prefix_lengths=[3, 5, 9, 12, 16, 20, 21])
    [2, 4, 7]
    >>> token_ends([1, 2, 3], prefix_lengths=[3, 4])
    [1, 1, 2]
    """
    total = len(prefix_lengths)
    ends: list[int] = []
    for c in char_ends[:-1]:
        t = next((i + 1 for i, length in enumerate(prefix_lengths) if length >= c), total)
        ends.append(max(t, ends[-1] if ends else 1))
    return [*ends, total]


def process_batch_advantages(scored: ScoredRollout, scorer: Any, tokenizer: Any, separator: str) -> torch.Tensor:
    """[N, Lc] per-token advantages from the process reward model's step probabilities."""
    rollout, g = scored.rollout, scored.rollout.group_size
    prompts = [ex.prompt for ex in rollout.examples for _ in range(g)]
    probabilities = scorer.step_probabilities(prompts, rollout.completions)
    lc = rollout.completion_ids.shape[1]
    ends: list[list[int]] = []
    rewards: list[list[float]] = []
    for i, (text, ids, mask) in enumerate(zip(rollout.completions, rollout.completion_ids, rollout.completion_mask)):
        tokens = ids[mask].tolist()
        if not tokens:
            ends.append([])
            rewards.append([])
            continue
        prefixes = tokenizer.batch_decode([tokens[: t + 1] for t in range(len(tokens))], skip_special_tokens=True)
        lengths = [len(t) for t in prefixes]
        chars = step_end_chars(text, separator)
        if len(chars) != len(probabilities[i]):
            raise RuntimeError(f"completion {i}: {len(chars)} steps here but {len(probabilities[i])} scored")
        ends.append(token_ends(chars, lengths))
        rewards.append(probabilities[i])
    groups = [process_advantages(rewards[p * g:(p + 1) * g], ends[p * g:(p + 1) * g], lc)
              for p in range(rollout.num_prompts)]
    return torch.cat(groups)
