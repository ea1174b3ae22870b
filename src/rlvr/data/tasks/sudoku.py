r"""Mini Sudoku: fill a grid so that every row, column and box holds each digit exactly once.

    difficulty 1: 4x4 (2x2 boxes),  6 blanks
    difficulty 2: 4x4 (2x2 boxes), 10 blanks
    difficulty 3: 6x6 (2x3 boxes), 14 blanks
    difficulty 4: 6x6 (2x3 boxes), 22 blanks

A puzzle starts from a random full grid (a pattern grid with its digits, rows within bands, bands,
columns within stacks and stacks shuffled) and loses cells in random order, each removal kept only
if the solution stays unique, so every puzzle has exactly one solution. The `sudoku` reward still
accepts any grid that keeps the givens and breaks no rule. Puzzles are split into train and test
by a hash of their text (see splits.py). Grid text: rows separated by ``/``, ``.`` for a blank.
"""

from __future__ import annotations

import random
from typing import Any

from rlvr.data.tasks import splits
from rlvr.data.tasks.grids import BOX_SHAPES, Grid, grid_text

NAME = "sudoku"
DIFFICULTIES = (1, 2, 3, 4)
LEVELS = {1: (4, 6), 2: (4, 10), 3: (6, 14), 4: (6, 22)}  # difficulty -> (size, blanks)
TEST_PERCENT = 20
# The answer-format instruction, kept in one place so a reward's parser and the prompt agree.
INSTRUCTION = "Put the completed grid in \\boxed{}: its rows top to bottom, each row's digits, rows separated by '/'."


def full_grid(size: int, rng: random.Random) -> Grid:
    """A random complete grid: a pattern grid with digits, rows and columns shuffled within the rules.

    >>> grid = full_grid(6, random.Random(0))
    >>> all(sorted(row) == [1, 2, 3, 4, 5, 6] for row in grid)
    True
    """
    box_rows, box_cols = BOX_SHAPES[size]
    # Row r of the pattern is row 0 shifted by box_cols per row in a band and 1 per band.
    pattern = [[(box_cols * (r % box_rows) + r // box_rows + c) % size for c in range(size)] for r in range(size)]
    digits = rng.sample(range(1, size + 1), size)
    rows = _shuffled_groups(size // box_rows, box_rows, rng)  # bands of box_rows rows
    cols = _shuffled_groups(size // box_cols, box_cols, rng)  # stacks of box_cols columns
    return [[digits[pattern[r][c]] for c in cols] for r in rows]


def _shuffled_groups(groups: int, width: int, rng: random.Random) -> list[int]:
    """0..groups*width-1, the groups in random order and the members of each group too."""
    order = []
    for group in rng.sample(range(groups), groups):
        order += [group * width + i for i in rng.sample(range(width), width)]
    return order


def count_solutions(grid: Grid, limit: int = 2) -> int:
    """How many ways the blanks (0) of `grid` can be filled, counting no further than `limit`.

    >>> count_solutions([[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 0]])
    1
    >>> count_solutions([[0] * 4 for _ in range(4)], limit=1000)
    288
    """
    size = len(grid)
    box_rows, box_cols = BOX_SHAPES[size]
    # used[unit] is a bit mask of the digits placed in each row, column and box (units 0..3*size-1).
    used = [0] * (3 * size)
    blanks = []
    for r in range(size):
        for c in range(size):
            units = (r, size + c, 2 * size + (r // box_rows) * (size // box_cols) + c // box_cols)
            if grid[r][c]:
                for unit in units:
                    used[unit] |= 1 << grid[r][c]
            else:
                blanks.append(units)
    return _search(blanks, used, sum(1 << d for d in range(1, size + 1)), limit)


def _search(blanks: list[tuple[int, int, int]], used: list[int], all_digits: int, limit: int) -> int:
    """Depth-first count of fillings, trying the blank with the fewest candidates first."""
    if not blanks:
        return 1
    best, best_free = 0, all_digits
    for i, (row, col, box) in enumerate(blanks):
        free = all_digits & ~(used[row] | used[col] | used[box])
        if free.bit_count() < best_free.bit_count():
            best, best_free = i, free
            if free == 0:
                return 0
    units = blanks[best]
    rest = blanks[:best] + blanks[best + 1 :]
    found = 0
    while best_free and found < limit:
        bit = best_free & -best_free  # the lowest candidate digit
        best_free ^= bit
        for unit in units:
            used[unit] |= bit
        found += _search(rest, used, all_digits, limit - found)
        for unit in units:
            used[unit] ^= bit
    return found


def draw(difficulty: int, rng: random.Random) -> tuple[str, str]:
    """(puzzle, solution) as grid text: a puzzle with LEVELS' blanks and exactly one solution.

    >>> puzzle, solution = draw(1, random.Random(0))
    >>> puzzle.count("."), len(solution)
    (6, 19)
    """
    size, blanks = LEVELS[difficulty]
    while True:  # removal can get stuck short of `blanks` on a few grids: start over from a new one
        solution = full_grid(size, rng)
        puzzle = [row[:] for row in solution]
        removed = 0
        for r, c in rng.sample([(r, c) for r in range(size) for c in range(size)], size * size):
            puzzle[r][c] = 0
            if count_solutions(puzzle) == 1:
                removed += 1
                if removed == blanks:
                    return grid_text(puzzle), grid_text(solution)
            else:
                puzzle[r][c] = solution[r][c]


def _row(puzzle: str, solution: str, difficulty: int) -> dict[str, Any]:
    size = len(puzzle.split("/"))
    box_rows, box_cols = BOX_SHAPES[size]
    shown = "\n".join(puzzle.split("/"))
    prompt = (
        f"Solve this {size}x{size} Sudoku: every row, every column and every {box_rows}x{box_cols} box must "
        f"contain each digit from 1 to {size} exactly once. Blanks are dots.\n{shown}\n{INSTRUCTION}"
    )
    return {"prompt": prompt, "puzzle": puzzle, "solution": solution, "difficulty": difficulty, "task": NAME}


def generate(n: int, *, split: str = "train", seed: int = 0, difficulty: int = 1) -> list[dict[str, Any]]:
    """n seeded, distinct Sudoku rows of one split and difficulty, each with a unique solution.

    >>> row = generate(1, seed=0, difficulty=3)[0]
    >>> sorted(row), row["puzzle"].count("."), row == generate(1, seed=0, difficulty=3)[0]
    (['difficulty', 'prompt', 'puzzle', 'solution', 'task'], 14, True)
    """
    splits.check_request(NAME, n, split, difficulty, DIFFICULTIES)
    rng = splits.make_rng(NAME, split, seed, difficulty)
    problems = splits.by_rejection(lambda r: draw(difficulty, r), n, split, rng, lambda p: p[0], TEST_PERCENT)
    return [_row(puzzle, solution, difficulty) for puzzle, solution in problems]
