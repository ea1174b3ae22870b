"""Seeded sampling with train/test splits that never share a problem.

A problem's split is a pure function of its canonical text (a hash bucket), not of the seed or
of the order problems are drawn in. So `generate(..., split="test")` can never return a problem
that `generate(..., split="train")` returns for any seed, and held-out numbers stay comparable
across runs.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from typing import TypeVar

from rlvr.errors import UserError

P = TypeVar("P")
SPLITS = ("train", "test")


def split_of(canonical: str, test_percent: int) -> str:
    """Return "test" or "train" for a problem, from the sha256 of its canonical text.

    >>> split_of("3 + 4", 30) == split_of("3 + 4", 30)
    True
    >>> {split_of(str(i), 20) for i in range(100)} == {"train", "test"}
    True
    """
    bucket = int(hashlib.sha256(canonical.encode()).hexdigest(), 16) % 100
    return "test" if bucket < test_percent else "train"


def check_request(task: str, n: int, split: str, difficulty: int, difficulties: Sequence[int]) -> None:
    """Raise UserError for a bad `n`, `split` or `difficulty`; the message says what is allowed.

    >>> check_request("arithmetic", 5, "dev", 1, (1, 2))
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: arithmetic: split 'dev' is unknown; use one of 'train', 'test'
    """
    if n < 0:
        raise UserError(f"{task}: n={n} is negative; ask for 0 or more problems")
    if split not in SPLITS:
        raise UserError(f"{task}: split {split!r} is unknown; use one of 'train', 'test'")
    if difficulty not in difficulties:
        allowed = ", ".join(str(d) for d in difficulties)
        raise UserError(f"{task}: difficulty {difficulty} is unknown; use one of {allowed} (data.difficulty)")


def make_rng(task: str, split: str, seed: int, difficulty: int) -> random.Random:
    """A generator private to one (task, split, seed, difficulty), stable across Python runs.

    String seeds are hashed with sha512 by `random.seed`, unaffected by PYTHONHASHSEED.

    >>> make_rng("t", "train", 0, 1).random() == make_rng("t", "train", 0, 1).random()
    True
    """
    return random.Random(f"{task}:{split}:{seed}:{difficulty}")


def fill(distinct: list[P], n: int, split: str, rng: random.Random) -> list[P]:
    """Take n problems from a shuffled list of distinct problems of one split.

    When n exceeds what exists, "train" tops up by sampling with replacement (training can
    revisit a problem) while "test" returns only the distinct problems (an evaluation set with
    repeats would weight some problems twice).

    >>> fill([1, 2, 3], 2, "test", random.Random(0))
    [1, 2]
    >>> fill([1, 2, 3], 5, "test", random.Random(0))
    [1, 2, 3]
    >>> len(fill([1, 2, 3], 5, "train", random.Random(0)))
    5
    """
    if n <= len(distinct):
        return distinct[:n]
    if split == "test" or not distinct:
        return list(distinct)
    return distinct + rng.choices(distinct, k=n - len(distinct))


def from_space(
    space: Sequence[P], n: int, split: str, rng: random.Random, key: Callable[[P], str], test_percent: int
) -> list[P]:
    """Sample from a small problem space that can be listed in full (e.g. all one-digit sums).

    >>> space = list(range(100))
    >>> test = from_space(space, 1000, "test", random.Random(0), str, 30)
    >>> train = from_space(space, 1000, "train", random.Random(0), str, 30)
    >>> len(set(test)) == len(test) and not set(test) & set(train)
    True
    """
    pool = [p for p in space if split_of(key(p), test_percent) == split]
    rng.shuffle(pool)
    return fill(pool, n, split, rng)


def by_rejection(
    draw: Callable[[random.Random], P], n: int, split: str, rng: random.Random, key: Callable[[P], str],
    test_percent: int,
) -> list[P]:
    """Sample n distinct problems of one split from a space too large to list.

    Draws that land in the other split or repeat a problem are thrown away. The attempt cap
    only matters for a space smaller than expected; then `fill` decides as in `from_space`.

    >>> rows = by_rejection(lambda r: r.randrange(10**6), 50, "test", random.Random(0), str, 20)
    >>> len(set(rows)) == 50 and all(split_of(str(p), 20) == "test" for p in rows)
    True
    """
    found: dict[str, P] = {}
    for _ in range(100 * n + 10_000):
        if len(found) >= n:
            break
        problem = draw(rng)
        k = key(problem)
        if k not in found and split_of(k, test_percent) == split:
            found[k] = problem
    return fill(list(found.values()), n, split, rng)
