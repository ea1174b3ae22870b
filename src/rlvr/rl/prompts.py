"""A resumable, seeded stream of prompt batches: epoch e visits the dataset in permutation(seed, e)."""

from __future__ import annotations

import torch


class PromptStream:
    """Yields batches of dataset positions; its whole state is (epoch, position)."""

    def __init__(self, size: int, batch_prompts: int, seed: int, shuffle: bool = True):
        if size < 1:
            raise ValueError("the training set is empty")
        self.size, self.batch_prompts, self.seed, self.shuffle = size, batch_prompts, seed, shuffle
        self.epoch, self.position = 0, 0
        self._order = self._permutation()

    def _permutation(self) -> list[int]:
        if not self.shuffle:
            return list(range(self.size))
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        return torch.randperm(self.size, generator=g).tolist()

    def next_batch(self) -> list[int]:
        """The next `batch_prompts` positions, wrapping into a new shuffled epoch when needed."""
        batch: list[int] = []
        while len(batch) < self.batch_prompts:
            if self.position == len(self._order):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation()
            batch.append(self._order[self.position])
            self.position += 1
        return batch

    def observe(self, positions: list[int], accuracies: list[float]) -> None:
        """Shuffled epochs do not depend on how the model fares (CurriculumStream's do)."""

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = state["epoch"], state["position"]
        self._order = self._permutation()
