"""Arithmetic questions with an exact integer answer, in five difficulty levels.

    1: a + b, one-digit numbers (0-9)             100 problems, 30% held out
    2: a + b, two-digit numbers (10-99)           8,100 problems, 20% held out
    3: a * b, two-digit times one-digit (2-9)     720 problems, 20% held out
    4: a op b op c, op in + - *, numbers 1-99     ~8.7M problems, 20% held out; may be negative
    5: a * b, three-digit times two-digit          81,000 problems, 20% held out (a tool's job: rlvr.envs)

Problems are split into train and test by a hash of their expression (see splits.py), so the
test set is the same held-out set for every seed.
"""

from __future__ import annotations

import random
from typing import Any

from rlvr.data.tasks import splits

NAME = "arithmetic"
DIFFICULTIES = (1, 2, 3, 4, 5)
# The answer-format instruction, kept in one place so a reward's parser and the prompt agree.
INSTRUCTION = "Put your final answer in \\boxed{}."

Problem = tuple[tuple[int, ...], tuple[str, ...]]  # (numbers, operators between them)


def expression(problem: Problem) -> str:
    """Plain ASCII text of a problem, its canonical form for the split hash.

    >>> expression(((23, 7, 4), ("*", "-")))
    '23 * 7 - 4'
    """
    numbers, ops = problem
    parts = [str(numbers[0])]
    for op, number in zip(ops, numbers[1:]):
        parts += [op, str(number)]
    return " ".join(parts)


def evaluate(problem: Problem) -> int:
    """Value of a problem with the usual precedence (* before + and -), without `eval`.

    >>> evaluate(((2, 3, 4), ("+", "*")))
    14
    >>> evaluate(((2, 3, 4), ("-", "-")))
    -5
    """
    numbers, ops = problem
    # Fold each run of products into one term, then add the signed terms left to right.
    terms, signs = [numbers[0]], [1]
    for op, number in zip(ops, numbers[1:]):
        if op == "*":
            terms[-1] *= number
        else:
            terms.append(number)
            signs.append(1 if op == "+" else -1)
    return sum(sign * term for sign, term in zip(signs, terms))


def _space(difficulty: int) -> list[Problem]:
    """Every problem of a difficulty small enough to list (1-3)."""
    if difficulty == 1:
        return [((a, b), ("+",)) for a in range(10) for b in range(10)]
    if difficulty == 2:
        return [((a, b), ("+",)) for a in range(10, 100) for b in range(10, 100)]
    # Times 0 and times 1 teach nothing, so the one-digit factor is 2-9.
    return [((a, b), ("*",)) for a in range(10, 100) for b in range(2, 10)]


def _draw_product(rng: random.Random) -> Problem:
    return (rng.randint(100, 999), rng.randint(10, 99)), ("*",)


def _draw_three_terms(rng: random.Random) -> Problem:
    numbers = tuple(rng.randint(1, 99) for _ in range(3))
    ops = tuple(rng.choice("+-*") for _ in range(2))
    return numbers, ops


def _row(problem: Problem, difficulty: int) -> dict[str, Any]:
    return {
        "prompt": f"What is {expression(problem)}? {INSTRUCTION}",
        "answer": str(evaluate(problem)),
        "difficulty": difficulty,
        "task": NAME,
    }


def generate(n: int, *, split: str = "train", seed: int = 0, difficulty: int = 1) -> list[dict[str, Any]]:
    """n seeded arithmetic rows of one split and difficulty.

    Deterministic in (n, split, seed, difficulty). Difficulty 1 has only 30 or so test
    problems: asking for more returns each once, while "train" repeats problems to reach n.

    >>> rows = generate(2, seed=0, difficulty=3)
    >>> sorted(rows[0])
    ['answer', 'difficulty', 'prompt', 'task']
    >>> rows == generate(2, seed=0, difficulty=3)
    True
    >>> generate(1, difficulty=1)[0]["prompt"].endswith("? Put your final answer in \\\\boxed{}.")
    True
    """
    splits.check_request(NAME, n, split, difficulty, DIFFICULTIES)
    rng = splits.make_rng(NAME, split, seed, difficulty)
    test_percent = 30 if difficulty == 1 else 20  # 30% of 100 leaves a usable held-out set
    if difficulty in (4, 5):
        draw = _draw_three_terms if difficulty == 4 else _draw_product
        problems = splits.by_rejection(draw, n, split, rng, expression, test_percent)
    else:
        problems = splits.from_space(_space(difficulty), n, split, rng, expression, test_percent)
    return [_row(p, difficulty) for p in problems]
