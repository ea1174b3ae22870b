"""A reward built from a spec that grades row by row, called like any other reward function.

A grader type (string_check, text_similarity, python, score_model, label_model, multi) implements
``grade(completions, items) -> [GradeResult]`` over the rows as dicts (templates read
``{{ item.field }}``); `RowGrader.__call__` gives it TRL's signature and returns `Scores`, so the
reward and its reasons reach training, `rlvr eval` and `rlvr grade` through the same registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.rewards.scores import GradeResult, Scores, items_from_columns
from rlvr.rewards.text import completion_text


class RowGrader:
    """Base of the spec-built rewards: `name` labels the reward; subclasses define `grade`."""

    name: str

    def grade(self, completions: list[str], items: Sequence[Mapping[str, Any]]) -> list[GradeResult]:
        raise NotImplementedError

    def __call__(self, prompts: list[Any] | None = None, completions: list[Any] | None = None,
                 completion_ids: list[list[int]] | None = None, **columns: Any) -> Scores:
        """The rows' rewards with TRL's signature; the prompt reaches templates as ``{{ item.prompt }}``
        unless a column already has that name."""
        texts = [completion_text(c) for c in completions or []]
        items = items_from_columns(len(texts), columns)
        for item, prompt in zip(items, prompts or [], strict=False):
            item.setdefault("prompt", prompt)
        results = self.grade(texts, items)
        return Scores([r.reward for r in results], [r.reason for r in results])

    @property
    def __name__(self) -> str:  # a reward is labelled by its function's name
        return self.name
