"""A curriculum by measured difficulty: prompts drawn by how often the current model solves them.

A prompt's difficulty is its pass rate under the current policy, estimated from the groups it was
trained on (an exponential average of each group's accuracy; unseen prompts start at PRIOR). A prompt
is drawn with weight FLOOR + p(1 − p): the half-solved ones, whose groups have the most reward spread
and so the largest gradient, come first. Solved prompts (p → 1) fade out and prompts too hard for now
(p → 0) wait; as the policy improves, harder prompts enter the middle band, so training moves to
harder prompts as accuracy rises. FLOOR keeps every prompt reachable, so estimates can recover.

Same interface as PromptStream (next_batch, state_dict, load_state_dict) plus `observe`.
"""

from __future__ import annotations

import math
from typing import Any

import torch

PRIOR = 0.5  # pass rate assumed for a prompt not yet seen: it gets the highest weight
FLOOR = 0.02  # minimum weight, so that no prompt is never drawn again
SMOOTHING = 0.5  # weight of the newest measurement in the running pass rate


def draw_weight(pass_rate: float | None) -> float:
    """
    >>> draw_weight(None), draw_weight(0.5), draw_weight(1.0), draw_weight(0.0)
    (0.27, 0.27, 0.02, 0.02)
    """
    p = PRIOR if pass_rate is None else pass_rate
    return round(FLOOR + p * (1 - p), 12)


class CurriculumStream:
    """Batches of distinct dataset positions drawn by `draw_weight`, seeded by (seed, draw count)."""

    def __init__(self, size: int, batch_prompts: int, seed: int):
        if size < batch_prompts:
            raise ValueError(f"the curriculum needs at least {batch_prompts} prompts, the training set has {size}")
        self.size, self.batch_prompts, self.seed = size, batch_prompts, seed
        self.pass_rates: list[float | None] = [None] * size
        self.draws = 0

    def next_batch(self) -> list[int]:
        weights = torch.tensor([draw_weight(p) for p in self.pass_rates], dtype=torch.float64)
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.draws)
        self.draws += 1
        return torch.multinomial(weights, self.batch_prompts, replacement=False, generator=generator).tolist()

    def observe(self, positions: list[int], accuracies: list[float]) -> None:
        """Fold each group's accuracy (NaN = not measurable) into its prompt's running pass rate."""
        for i, accuracy in zip(positions, accuracies, strict=True):
            if math.isnan(accuracy):
                continue
            old = self.pass_rates[i]
            self.pass_rates[i] = accuracy if old is None else (1 - SMOOTHING) * old + SMOOTHING * accuracy

    def state_dict(self) -> dict[str, Any]:
        return {"draws": self.draws, "pass_rates": list(self.pass_rates)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.draws, self.pass_rates = state["draws"], list(state["pass_rates"])
