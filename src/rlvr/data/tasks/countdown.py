"""Countdown puzzles: combine the given numbers, each exactly once, to reach a target.

    difficulty 1: 3 numbers from 1-25
    difficulty 2: 4 numbers, three from 1-25 and one of 25, 50, 75, 100
    difficulty 3: 5 numbers, four from 1-25 and one of 25, 50, 75, 100

Every puzzle is solvable by construction: the target is the value of a random expression that
uses each number once, with + - * and exact division, every intermediate a positive integer
(the rules of the TV game, and what the countdown reward checks). Problems are split into
train and test by a hash of (sorted numbers, target), see splits.py.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from rlvr.data.tasks import splits

NAME = "countdown"
DIFFICULTIES = (1, 2, 3)
SMALL = range(1, 26)
LARGE = (25, 50, 75, 100)
MAX_TARGET = 1000
TEST_PERCENT = 20
# The answer-format instruction, kept in one place so a reward's parser and the prompt agree.
INSTRUCTION = "Put the expression in \\boxed{}."

Problem = tuple[tuple[int, ...], int, str]  # (numbers in prompt order, target, one solution)


def canonical(problem: Problem) -> str:
    """The split key: order of the numbers and the hidden solution do not matter.

    >>> canonical(((7, 3, 25), 46, "3 * 7 + 25"))
    '3,7,25->46'
    """
    numbers, target, _ = problem
    return ",".join(str(x) for x in sorted(numbers)) + f"->{target}"


def _apply(x: int, y: int, op: str) -> int | None:
    """x op y under the game's rules: a positive integer, exact division, no / 1; else None."""
    if op == "+":
        return x + y
    if op == "*":
        return x * y
    if op == "-":
        return x - y if x > y else None
    return x // y if x % y == 0 and y > 1 else None  # / 1 is a wasted step


def _combine(a: tuple[int, str], b: tuple[int, str], rng: random.Random) -> tuple[int, str] | None:
    """One random legal operation on two (value, text) pairs; None if the draw is illegal."""
    (x, xt), (y, yt) = (a, b) if a[0] >= b[0] else (b, a)  # larger first: x - y and x / y stay positive
    op = rng.choice("+-*/")
    value = _apply(x, y, op)
    return None if value is None else (value, f"({xt} {op} {yt})")


def _unwrap(text: str) -> str:
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def build(numbers: tuple[int, ...], rng: random.Random) -> tuple[int, str] | None:
    """Value and text of a random expression using each number once, or None after an illegal step.

    >>> value, text = build((3, 4), random.Random(1))
    >>> value == eval(text)  # trusted, generated text
    True
    """
    items = [(x, str(x)) for x in numbers]
    while len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        merged = _combine(items[i], items[j], rng)
        if merged is None:
            return None
        items = [item for k, item in enumerate(items) if k not in (i, j)] + [merged]
    value, text = items[0]
    return value, _unwrap(text)


def worked(numbers: tuple[int, ...] | list[int], target: int) -> str | None:
    r"""A worked solution, one operation a sentence, then the whole expression boxed; None if there is none.

    Depth-first: ordered pairs of the numbers left (the newest value first), then + - * / in that order,
    under the generator's rules (a positive integer at every step, exact division, no / 1), so every
    generated puzzle has one. Meant as cold-start SFT data: each sentence is one operation and its value.

    >>> print(worked((20, 24, 12), 40))
    20 * 24 = 480. 480 / 12 = 40. \boxed{(20 * 24) / 12}
    >>> worked((1, 2, 4), 100) is None
    True
    """
    def search(items: list[tuple[int, str]], steps: tuple[str, ...]) -> tuple[str, ...] | None:
        if len(items) == 1:
            return (*steps, f"\\boxed{{{_unwrap(items[0][1])}}}") if items[0][0] == target else None
        for i, j in itertools.permutations(range(len(items)), 2):
            (x, xt), (y, yt) = items[i], items[j]
            rest = [item for k, item in enumerate(items) if k not in (i, j)]
            for op in "+-*/" if i < j else "-/":  # x + y and x * y once, x - y and x / y both ways
                value = _apply(x, y, op)
                if value is not None:
                    merged = (value, f"({xt} {op} {yt})")
                    found = search([merged, *rest], (*steps, f"{x} {op} {y} = {value}."))
                    if found is not None:
                        return found
        return None

    found = search([(x, str(x)) for x in numbers], ())
    return None if found is None else " ".join(found)


def _draw_numbers(difficulty: int, rng: random.Random) -> tuple[int, ...]:
    if difficulty == 1:
        return tuple(rng.sample(SMALL, 3))
    small = rng.sample(SMALL, difficulty + 1)
    large = rng.choice([x for x in LARGE if x not in small])  # distinct numbers: "each once" is unambiguous
    numbers = [*small, large]
    rng.shuffle(numbers)
    return tuple(numbers)


def draw(difficulty: int, rng: random.Random) -> Problem:
    """One random solvable puzzle with a target in 1..MAX_TARGET.

    >>> numbers, target, solution = draw(2, random.Random(0))
    >>> len(numbers), 1 <= target <= MAX_TARGET, eval(solution) == target
    (4, True, True)
    """
    while True:  # a quarter to a half of the draws are legal and in range, so this ends fast
        numbers = _draw_numbers(difficulty, rng)
        built = build(numbers, rng)
        if built is not None and 1 <= built[0] <= MAX_TARGET:
            return numbers, built[0], built[1]


def prompt(numbers: tuple[int, ...], target: int) -> str:
    """The question a puzzle asks."""
    listed = ", ".join(str(x) for x in numbers)
    return f"Using the numbers [{listed}], each exactly once, and the operations + - * /, make {target}. {INSTRUCTION}"


def _row(problem: Problem, difficulty: int) -> dict[str, Any]:
    numbers, target, _ = problem
    return {
        "prompt": prompt(numbers, target),
        "numbers": list(numbers),
        "target": target,
        "difficulty": difficulty,
        "task": NAME,
    }


def generate(n: int, *, split: str = "train", seed: int = 0, difficulty: int = 1) -> list[dict[str, Any]]:
    """n seeded, distinct, solvable countdown rows of one split and difficulty.

    >>> row = generate(1, seed=0, difficulty=1)[0]
    >>> sorted(row)
    ['difficulty', 'numbers', 'prompt', 'target', 'task']
    >>> len(row["numbers"]), row == generate(1, seed=0, difficulty=1)[0]
    (3, True)
    """
    splits.check_request(NAME, n, split, difficulty, DIFFICULTIES)
    rng = splits.make_rng(NAME, split, seed, difficulty)
    problems = splits.by_rejection(lambda r: draw(difficulty, r), n, split, rng, canonical, TEST_PERCENT)
    return [_row(p, difficulty) for p in problems]
