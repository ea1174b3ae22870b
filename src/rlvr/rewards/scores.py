"""What a reward function returns, and the rows it is handed in `rlvr grade`.

A reward function returns one float (or None: not applicable) per completion, as TRL expects. It may
return a `Scores` instead: the same list, carrying a short reason for each completion ("answer '71' !=
expected '72'"), which `rlvr grade` writes beside the reward. Training reads only the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlvr.rewards.trainer_hooks import HOOKS

# what the caller fills in; never dataset columns (the hooks: trainer_state, log_metric, log_extra)
TRL_KEYWORDS = ("prompts", "completions", "completion_ids", *HOOKS)


class Scores(list[float | None]):
    """One reward (float or None) per completion, and `reasons`: one short text per completion, or None.

    >>> s = Scores([1.0, None], ["answer '4' matches", "the row has no 'answer'"])
    >>> s == [1.0, None], s.reasons[1]
    (True, "the row has no 'answer'")
    """

    def __init__(self, rewards: Iterable[float | None] = (), reasons: Iterable[str] | None = None):
        super().__init__(rewards)
        self.reasons: list[str] | None = None if reasons is None else list(reasons)
        if self.reasons is not None and len(self.reasons) != len(self):
            raise ValueError(f"{len(self.reasons)} reasons for {len(self)} rewards")


@dataclass(frozen=True)
class GradeResult:
    """The grade of one completion."""

    reward: float | None  # None = not scored (the row lacks what the reward needs, or a judge failed)
    reason: str  # a short human-readable why, e.g. "answer '71' != expected '72'"


def short(text: str, limit: int = 40) -> str:
    """`text` quoted, cut to `limit` characters, for reasons.

    >>> short("a" * 50, 5)
    "'aaaaa…'"
    """
    return repr(text[:limit] + ("…" if len(text) > limit else ""))


def items_from_columns(n: int, columns: Mapping[str, Any]) -> list[dict[str, Any]]:
    """N row dicts from columns of N values (TRL hands a batch over column by column); TRL's own
    keywords and anything that is not a column of N values are left out.

    >>> items_from_columns(2, {"answer": ["4", "5"], "level": [1, 2], "trainer_state": None})
    [{'answer': '4', 'level': 1}, {'answer': '5', 'level': 2}]
    """
    rows = {k: v for k, v in columns.items() if k not in TRL_KEYWORDS and isinstance(v, (list, tuple)) and len(v) == n}
    return [{key: values[i] for key, values in rows.items()} for i in range(n)]


def columns_from_items(items: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Columns of N values from N row dicts, None where a row lacks a key; TRL's own keywords dropped.

    >>> columns_from_items([{"answer": "4"}, {"answer": "5", "level": 2}])
    {'answer': ['4', '5'], 'level': [None, 2]}
    """
    keys: dict[str, None] = {}  # a dict, not a set: keeps the columns in first-seen order
    for item in items:
        keys.update(dict.fromkeys(k for k in item if k not in TRL_KEYWORDS))
    return {key: [item.get(key) for item in items] for key in keys}
