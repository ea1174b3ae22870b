"""What every grader returns, and the bridge from a grader to a TRL-style reward function.

A grader scores N completions against N dataset rows (``items``)::

    grader.grade(completions=[...N str], items=[...N dict]) -> [...N GradeResult]

and `as_reward_function` turns it into ``fn(prompts, completions, completion_ids, **columns)``
so it can sit in a training config's reward list next to the built-in rewards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rlvr.rewards.combine import TRL_KEYWORDS
from rlvr.rewards.text import completion_text


@dataclass(frozen=True)
class GradeResult:
    """The grade of one completion."""

    reward: float | None  # None = not scored (the row lacks what the grader needs, or the judge failed)
    reason: str  # a short human-readable why, e.g. "answer '71' != expected '72'"


class Grader(Protocol):
    """Anything with a name that grades N completions against N dataset rows."""

    @property
    def name(self) -> str: ...  # labels the reward in metrics and in `rlvr grade`'s summary

    def grade(self, completions: list[str], items: list[Mapping[str, Any]]) -> list[GradeResult]: ...


def as_reward_function(grader: Grader) -> Callable[..., list[float | None]]:
    """`grader` as a reward function with TRL's signature; dataset columns become each row's `item`.

    The prompt is available to templates as ``{{ item.prompt }}`` unless a column already has
    that name.

    >>> from rlvr.graders.build import build_grader
    >>> reward = as_reward_function(build_grader({"type": "math", "name": "accuracy"}))
    >>> reward.__name__, reward(prompts=["1+1=", "2+2="], completions=[r"\\boxed{2}", "5"], answer=["2", "4"])
    ('accuracy', [1.0, 0.0])
    """

    def reward(
        prompts: list[Any] | None = None,
        completions: list[Any] | None = None,
        completion_ids: list[list[int]] | None = None,
        **columns: list[Any],
    ) -> list[float | None]:
        texts = [completion_text(c) for c in completions or []]
        items = items_from_columns(len(texts), columns)
        for item, prompt in zip(items, prompts or [], strict=False):
            item.setdefault("prompt", prompt)
        return [result.reward for result in grader.grade(texts, items)]

    # compute_rewards and the training metrics label each reward by its function's name.
    reward.__name__ = reward.__qualname__ = grader.name
    return reward


def items_from_columns(n: int, columns: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    """N row dicts from columns of N values (TRL hands a batch over column by column).

    >>> items_from_columns(2, {"answer": ["4", "5"], "level": [1, 2]})
    [{'answer': '4', 'level': 1}, {'answer': '5', 'level': 2}]
    """
    return [{key: values[i] for key, values in columns.items()} for i in range(n)]


def columns_from_items(items: list[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Columns of N values from N row dicts, None where a row lacks a key; TRL's own keywords dropped.

    >>> columns_from_items([{"answer": "4"}, {"answer": "5", "level": 2}])
    {'answer': ['4', '5'], 'level': [None, 2]}
    """
    keys: dict[str, None] = {}  # a dict, not a set: keeps the columns in first-seen order
    for item in items:
        keys.update(dict.fromkeys(k for k in item if k not in TRL_KEYWORDS))
    return {key: [item.get(key) for item in items] for key in keys}
