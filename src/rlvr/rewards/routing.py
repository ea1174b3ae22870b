"""Rewards for some rows only: `only_where(fn, {"kind": "reasoning"})`; a reward read as a verdict:
`as_verdict(fn, at=1.0)`.

DeepSeek-R1's last stage (Guo et al. 2025, §2.3.4) scores reasoning prompts with rules and
general prompts with a preference reward model. Here a dataset column decides: each reward in the
config may carry `when: {column: value}`; it is called on the matching rows only, and the others
get None (not applicable), so the weighted total of a row sums just the rewards that apply to it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.asynchronous import awaited
from rlvr.rewards.trainer_hooks import scattered


def only_where(fn: Callable[..., list[float | None]], when: dict[str, Any],
               name: str = "reward") -> Callable[..., list[float | None]]:
    """`fn` restricted to rows whose columns match `when` (a list value matches any of its items).

    >>> def length(completions, **kwargs):
    ...     return [float(len(c)) for c in completions]
    >>> routed = only_where(length, {"kind": "general"})
    >>> routed(completions=["ab", "abc", "a"], kind=["general", "maths", "general"], prompts=["p", "q", "r"])
    [2.0, None, 1.0]
    """
    if not when:
        raise UserError(f"reward '{name}': `when` is empty; give a column and the value(s) it must have")

    @functools.wraps(fn)
    def routed(completions: list[Any], **kwargs: Any) -> list[float | None]:
        n = len(completions)
        missing = [column for column in when if column not in kwargs]
        if missing:
            raise UserError(f"reward '{name}' applies when {missing[0]!r} matches, but the data has no "
                            f"{missing[0]!r} column; add it to every row, or drop `when`")
        rows = [i for i in range(n) if all(_matches(kwargs[c][i], want) for c, want in when.items())]
        result: list[float | None] = [None] * n
        if rows:
            subset = {k: [v[i] for i in rows] if isinstance(v, list) and len(v) == n else v for k, v in kwargs.items()}
            if "log_extra" in kwargs:  # (TRL's, rlvr.rewards.trainer_hooks: its values back at their rows)
                subset["log_extra"] = scattered(kwargs["log_extra"], rows, n)
            values = awaited(fn(completions=[completions[i] for i in rows], **subset))
            for i, value in zip(rows, values, strict=True):
                result[i] = value
        return result

    return routed


def as_verdict(fn: Callable[..., list[float | None]], at: float, name: str | None = None,
               timeout_s: float | None = None,
               setting: str = "rewards[].timeout_s") -> Callable[..., list[float | None]]:
    """`fn` (named `name`) as a verifier: 1.0 where its score is at least `at`, 0.0 below, None (not scored, or
    NaN) kept; how a reward of yours judges held-out answers (accuracy, pass@k) where the data has no verifier
    of its own. What it returns is checked as a training reward's is: one number or None per completion, and
    each call is under the contract of a reward's (rlvr.deadline.call_user): `timeout_s` (the `setting`; None or
    0: none), sys.exit one line.

    >>> def overlap(completions, **kwargs):
    ...     return [0.5, 1.0, None, 0.25]
    >>> as_verdict(overlap, 0.5)(completions=["a", "b", "c", "d"])
    [1.0, 1.0, None, 0.0]
    >>> as_verdict(lambda completions, **kw: "yes", 0.5, "judge.py:said")(completions=["a"])
    Traceback (most recent call last):
    rlvr.errors.UserError: reward function 'judge.py:said' returned str 'yes', not a list of 1 floats ...
    """
    from rlvr.deadline import call_user
    from rlvr.rewards.combine import EXIT_FIX, validated

    label = str(name or getattr(fn, "__name__", "reward"))

    @functools.wraps(fn)
    def verdict(*args: Any, **kwargs: Any) -> list[float | None]:
        raw = call_user(f"reward function '{label}'", lambda: awaited(fn(*args, **kwargs)), timeout_s, setting,
                        EXIT_FIX)
        scores = validated(label, raw, len(kwargs.get("completions", [])))
        return [None if score is None else float(score >= at) for score in scores]

    return verdict


def applies_to(row: Mapping[str, Any], when: dict[str, Any] | None) -> bool:
    """Whether a reward with `when` scores the row with these columns (no `when`: every row).

    >>> applies_to({"kind": "maths"}, {"kind": ["maths", "code"]}), applies_to({}, {"kind": "maths"})
    (True, False)
    """
    return when is None or all(column in row and _matches(row[column], want) for column, want in when.items())


def _matches(value: Any, want: Any) -> bool:
    return value in want if isinstance(want, list) else value == want
