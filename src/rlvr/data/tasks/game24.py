"""The 24 game: make 24 from four numbers 1-13, each used once, with + - * / and brackets.

Only solvable puzzles are served (1,362 of the 1,820 sets of four). Difficulty comes from the
solutions each set has, counted as expression trees (``a+b`` and ``b+a`` are one tree):

    difficulty 1: 10 or more trees with whole-number steps         656 sets, e.g. 1 2 3 4
    difficulty 2: 1 to 9 trees with whole-number steps             690 sets, e.g. 4 4 10 10
    difficulty 3: every solution needs a fraction on the way        16 sets, e.g. 3 3 8 8 = 8/(3-8/3)

The whole space is classified once per process (about a second) and split into train and test by
a hash of the sorted numbers (see splits.py): 20% held out, 50% at difficulty 3 (16 sets). The
rows are countdown rows with target 24: the `countdown` reward scores them, exactly (fractions
included) and without eval.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from fractions import Fraction
from typing import Any

from rlvr.data.tasks import splits

NAME = "game24"
DIFFICULTIES = (1, 2, 3)
NUMBERS = range(1, 14)
TARGET = 24
MANY_SOLUTIONS = 10  # whole-number trees from which a set counts as difficulty 1
TEST_PERCENT = 20
# The answer-format instruction, kept in one place so a reward's parser and the prompt agree.
INSTRUCTION = "Put the expression in \\boxed{}."

Values = tuple[int, ...]  # a multiset of numbers, sorted


def _results(x: Fraction, y: Fraction) -> list[Fraction]:
    """x op y for each operation and order: + and * once, - and / both ways, no division by 0."""
    out = [x + y, x * y, x - y, y - x]
    if y:
        out.append(x / y)
    if x:
        out.append(y / x)
    return out


def _splits(values: Values) -> list[tuple[Values, Values]]:
    """Each way to cut `values` (by position) into two non-empty parts, the smaller part first."""
    n = len(values)
    out = []
    for size in range(1, n // 2 + 1):
        for left in itertools.combinations(range(n), size):
            if 2 * size == n and 0 not in left:
                continue  # an even cut is listed once, from the side holding the first position
            rest = tuple(values[i] for i in range(n) if i not in left)
            out.append((tuple(values[i] for i in left), rest))
    return out


@functools.cache
def trees(values: Values) -> tuple[Counter[Fraction], Counter[Fraction]]:
    """value -> number of expression trees over `values` reaching it: (all, whole-number steps only).

    >>> all_trees, whole = trees((1, 2))
    >>> sorted(all_trees.items())
    [(Fraction(-1, 1), 1), (Fraction(1, 2), 1), (Fraction(1, 1), 1), (Fraction(2, 1), 2), (Fraction(3, 1), 1)]
    >>> Fraction(1, 2) in whole
    False
    """
    if len(values) == 1:
        return Counter({Fraction(values[0]): 1}), Counter({Fraction(values[0]): 1})
    every: Counter[Fraction] = Counter()
    whole: Counter[Fraction] = Counter()
    for left, right in _splits(values):
        (left_all, left_whole), (right_all, right_whole) = trees(left), trees(right)
        for x, y, count in _pairs(left_all, right_all):
            for v in _results(x, y):
                every[v] += count
        for x, y, count in _pairs(left_whole, right_whole):
            for v in _results(x, y):
                if v.denominator == 1:
                    whole[v] += count
    return every, whole


def _pairs(a: Counter[Fraction], b: Counter[Fraction]) -> list[tuple[Fraction, Fraction, int]]:
    return [(x, y, cx * cy) for x, cx in a.items() for y, cy in b.items()]


def solutions(numbers: Values, target: int = TARGET) -> tuple[int, int]:
    """(trees reaching `target`, of which with whole-number steps only).

    The last operation is found by lookup: for each value y of the smaller part, the value x of
    the other part that makes x op y = target (building every value of four numbers is 10x slower).

    >>> solutions((1, 2, 3, 4)), solutions((3, 3, 8, 8)), solutions((1, 1, 1, 1))
    ((52, 34), (4, 0), (0, 0))
    """
    t = Fraction(target)
    every = whole = 0
    for small, big in _splits(tuple(sorted(numbers))):
        (small_all, small_whole), (big_all, big_whole) = trees(small), trees(big)
        for y, count in small_all.items():
            every += count * sum(big_all.get(x, 0) for x in _partners(y, t))
        for y, count in small_whole.items():
            whole += count * sum(big_whole.get(x, 0) for x in _partners(y, t) if x.denominator == 1)
    return every, whole


def _partners(y: Fraction, t: Fraction) -> list[Fraction]:
    """Every x with x op y = t for one operation and order (the inverses of `_results`)."""
    partners = [t - y, t + y, y - t]  # x + y, x - y, y - x
    if y:
        partners += [t / y, t * y, y / t]  # x * y, x / y, y / x (x = y / t is not 0 when y is not)
    return partners


def difficulty_of(numbers: Values) -> int | None:
    """1, 2 or 3 as in the module docstring; None when no expression makes 24.

    >>> [difficulty_of(n) for n in [(1, 2, 3, 4), (4, 4, 10, 10), (3, 3, 8, 8), (1, 1, 1, 1)]]
    [1, 2, 3, None]
    """
    every, whole = solutions(numbers)
    if not every:
        return None
    if not whole:
        return 3
    return 1 if whole >= MANY_SOLUTIONS else 2


@functools.cache
def _levels() -> dict[int | None, list[Values]]:
    """Every set of four numbers by difficulty (None: unsolvable), computed once per process."""
    levels: dict[int | None, list[Values]] = {}
    for numbers in itertools.combinations_with_replacement(NUMBERS, 4):
        levels.setdefault(difficulty_of(numbers), []).append(numbers)
    return levels


def canonical(numbers: Values) -> str:
    """The split key: the sorted numbers.

    >>> canonical((8, 3, 8, 3))
    '3,3,8,8'
    """
    return ",".join(str(x) for x in sorted(numbers))


def generate(n: int, *, split: str = "train", seed: int = 0, difficulty: int = 1) -> list[dict[str, Any]]:
    """n seeded, solvable 24-game rows of one split and difficulty, numbers in random order.

    >>> row = generate(1, seed=0, difficulty=3)[0]
    >>> sorted(row), row["target"], difficulty_of(tuple(row["numbers"]))
    (['difficulty', 'numbers', 'prompt', 'target', 'task'], 24, 3)
    """
    splits.check_request(NAME, n, split, difficulty, DIFFICULTIES)
    rng = splits.make_rng(NAME, split, seed, difficulty)
    test_percent = TEST_PERCENT if difficulty < 3 else 50  # 20% of 16 sets would test on 2 or 3
    problems = splits.from_space(_levels()[difficulty], n, split, rng, canonical, test_percent)
    rows = []
    for numbers in problems:
        shown = list(numbers)
        rng.shuffle(shown)
        listed = ", ".join(str(x) for x in shown)
        rows.append({
            "prompt": f"Using the numbers [{listed}], each exactly once, and + - * / with brackets, make "
            f"{TARGET}. Fractions are allowed along the way. {INSTRUCTION}",
            "numbers": shown,
            "target": TARGET,
            "difficulty": difficulty,
            "task": NAME,
        })
    return rows
