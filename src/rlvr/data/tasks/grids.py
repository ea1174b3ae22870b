"""The text form of a mini Sudoku grid, shared by the task's generator and the `sudoku` reward.

A grid is written as rows top to bottom separated by ``/``, with ``.`` (or ``0``) for a blank:
``12.4/34../.1../4.2.``.
"""

from __future__ import annotations

import re

from rlvr.errors import UserError

BOX_SHAPES = {4: (2, 2), 6: (2, 3), 9: (3, 3)}  # size -> (rows, columns) of one box
Grid = list[list[int]]  # rows of cells; 0 = blank


def parse_grid(text: str) -> Grid:
    """A puzzle or solution grid from its text: rows separated by ``/``, ``.`` or ``0`` for a blank.

    >>> parse_grid("12.4/34../.1../4.2.")[0]
    [1, 2, 0, 4]
    >>> parse_grid("123/456")
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: sudoku puzzle '123/456' is not 4, 6 or 9 rows of as many cells (fix the data)
    """
    rows = [row.strip() for row in str(text).strip().split("/")]
    size = len(rows)
    well_formed = size in BOX_SHAPES and all(re.fullmatch(rf"[.0-{size}]{{{size}}}", row) for row in rows)
    if not well_formed:
        raise UserError(f"sudoku puzzle {text!r} is not 4, 6 or 9 rows of as many cells (fix the data)")
    return [[0 if cell == "." else int(cell) for cell in row] for row in rows]


def grid_text(grid: Grid) -> str:
    """The text form of a grid, the inverse of `parse_grid`.

    >>> grid_text([[1, 2, 0, 4], [3, 4, 0, 0], [0, 1, 0, 0], [4, 0, 2, 0]])
    '12.4/34../.1../4.2.'
    """
    return "/".join("".join(str(cell) if cell else "." for cell in row) for row in grid)
