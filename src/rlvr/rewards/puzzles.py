r"""Puzzle rewards: constraint satisfaction, checked constraint by constraint.

Countdown and the 24 game are scored by `rlvr.rewards.countdown.countdown` (an AST allow-list,
never eval; each given number exactly once): a 24-game row is a countdown row whose target is 24.

`sudoku` scores mini Sudoku (Latin squares with boxes, 4x4 / 6x6 / 9x9). A grid is written as rows
top to bottom separated by ``/``, with ``.`` for a blank in a puzzle: ``12.4/34../.1../4.2.``.
The completion puts its filled grid in ``\boxed{}`` (else ``<answer>``); only its digits are read,
row by row, so ``\boxed{1234/3412/2143/4321}``, one row per line, or a LaTeX matrix all work,
as long as there are exactly size x size digits. Any grid that keeps every given and satisfies
every row, column and box scores 1.0, whether or not the puzzle's solution is unique.
"""

from __future__ import annotations

import re
from typing import Any

from rlvr.data.tasks.grids import BOX_SHAPES, Grid, parse_grid
from rlvr.rewards.extraction import extract_answer
from rlvr.rewards.scores import Scores
from rlvr.rewards.text import completion_text


def violations(grid: Grid, givens: Grid) -> list[str]:
    """Every broken rule of a filled `grid` against the puzzle `givens`; empty when it is solved.

    >>> puzzle = parse_grid("12.4/34../.1../4.2.")
    >>> violations(parse_grid("1234/3412/2143/4321"), puzzle)
    []
    >>> violations(parse_grid("1234/3412/2143/4312"), puzzle)
    ['column 3', 'column 4', 'given at row 4, column 3']
    """
    size = len(givens)
    box_rows, box_cols = BOX_SHAPES[size]
    digits = set(range(1, size + 1))
    broken = [f"row {r + 1}" for r in range(size) if set(grid[r]) != digits]
    broken += [f"column {c + 1}" for c in range(size) if {grid[r][c] for r in range(size)} != digits]
    for top in range(0, size, box_rows):
        for left in range(0, size, box_cols):
            box = {grid[r][c] for r in range(top, top + box_rows) for c in range(left, left + box_cols)}
            if box != digits:
                broken.append(f"box at row {top + 1}, column {left + 1}")
    broken += [
        f"given at row {r + 1}, column {c + 1}"
        for r in range(size)
        for c in range(size)
        if givens[r][c] and grid[r][c] != givens[r][c]
    ]
    return broken


def answer_grid(text: str, size: int) -> Grid | None:
    r"""The grid a completion proposes: the digits of its final answer, row by row; None if not size².

    >>> answer_grid(r"so \boxed{1234/3412/2143/4321}", 4)[3]
    [4, 3, 2, 1]
    >>> answer_grid(r"\boxed{1234/3412}", 4) is None
    True
    """
    answer = extract_answer(text, "strict")
    digits = [int(d) for d in re.findall(r"\d", answer or "")]
    if len(digits) != size * size:
        return None
    return [digits[r * size : (r + 1) * size] for r in range(size)]


def sudoku(completions: list[Any], puzzle: list[Any], **kwargs: Any) -> Scores:
    r"""1.0 where the completion's grid keeps the givens of `puzzle` and breaks no rule, else 0.0; a reason
    for each. A puzzle that is not a grid is a UserError naming the fix.

    >>> scores = sudoku([r"\boxed{1234/3412/2143/4321}", r"\boxed{1234/3412/2143/4312}", "no idea"],
    ...                 puzzle=["12.4/34../.1../4.2."] * 3)
    >>> scores, scores.reasons[2]
    ([1.0, 0.0, 0.0], 'no 4x4 grid in the answer')
    """
    rewards: list[float | None] = []
    reasons: list[str] = []
    for completion, text in zip(completions, puzzle, strict=True):
        givens = parse_grid(text)
        grid = answer_grid(completion_text(completion), len(givens))
        broken = None if grid is None else violations(grid, givens)
        rewards.append(1.0 if broken == [] else 0.0)
        reasons.append("no {0}x{0} grid in the answer".format(len(givens)) if broken is None
                       else f"breaks {broken[0]}" if broken else "keeps the givens and breaks no rule")
    return Scores(rewards, reasons)
