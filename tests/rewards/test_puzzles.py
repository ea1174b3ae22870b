"""Sudoku reward: every row, column, box and given checked; any valid grid scores, nothing else does."""

import pytest

from rlvr.data.tasks.grids import grid_text, parse_grid
from rlvr.errors import UserError
from rlvr.rewards.puzzles import answer_grid, sudoku, violations

PUZZLE_4 = "12.4/34../.1../4.2."
SOLUTION_4 = "1234/3412/2143/4321"
PUZZLE_6 = "1.3.5./4.6.2./2.1.6./5.4.3./3.2.4./6.5.1."
SOLUTION_6 = "123456/456123/231564/564231/312645/645312"


def boxed(grid: str) -> str:
    return rf"The grid is \boxed{{{grid}}}."


def test_the_reference_solutions_are_valid():
    assert violations(parse_grid(SOLUTION_4), parse_grid(PUZZLE_4)) == []
    assert violations(parse_grid(SOLUTION_6), parse_grid(PUZZLE_6)) == []


@pytest.mark.parametrize(
    ("completion", "score"),
    [
        (boxed(SOLUTION_4), 1.0),
        (f"<answer>{SOLUTION_4}</answer>", 1.0),
        (boxed("1 2 3 4 / 3 4 1 2 / 2 1 4 3 / 4 3 2 1"), 1.0),  # spaces are ignored
        (r"\boxed{\begin{matrix}1&2&3&4\\3&4&1&2\\2&1&4&3\\4&3&2&1\end{matrix}}", 1.0),
        (boxed("1234/3412/2143/4312"), 0.0),  # columns 3 and 4 repeat, a given changed
        (boxed("1234/3412/2143"), 0.0),  # a row short
        (boxed("1234/3412/2143/43210"), 0.0),  # a digit too many
        (SOLUTION_4, 0.0),  # not in a box or an answer tag
        ("", 0.0),
    ],
)
def test_sudoku_scores(completion, score):
    assert sudoku([completion], puzzle=[PUZZLE_4]) == [score]


def test_any_valid_grid_consistent_with_the_givens_scores():
    # An empty puzzle has 288 solutions: each valid grid scores, a Latin square with bad boxes does not.
    empty = "..../..../..../...."
    assert sudoku([boxed("1234/3412/2143/4321"), boxed("2143/4321/1234/3412")], puzzle=[empty] * 2) == [1.0, 1.0]
    assert sudoku([boxed("1234/2341/3412/4123")], puzzle=[empty]) == [0.0]


def test_each_rule_is_checked_on_its_own():
    givens = parse_grid("..../..../..../....")
    latin_not_boxes = parse_grid("1234/2341/3412/4123")
    assert violations(latin_not_boxes, givens) == [
        "box at row 1, column 1", "box at row 1, column 3", "box at row 3, column 1", "box at row 3, column 3",
    ]
    swapped_rows = parse_grid("1234/1234/3412/3412")
    assert "column 1" in violations(swapped_rows, givens)
    assert violations(parse_grid(SOLUTION_4), parse_grid("4.../..../..../....")) == ["given at row 1, column 1"]


def test_six_by_six_boxes_are_two_rows_by_three_columns():
    assert sudoku([boxed(SOLUTION_6)], puzzle=[PUZZLE_6]) == [1.0]
    # Valid rows and columns, but the boxes of a 3x2 layout instead of 2x3:
    transposed = "/".join("".join(row[i] for row in SOLUTION_6.split("/")) for i in range(6))
    assert violations(parse_grid(transposed), parse_grid("....../....../....../....../....../......"))


def test_grid_text_round_trip_and_answer_digits():
    assert grid_text(parse_grid(PUZZLE_6)) == PUZZLE_6
    assert answer_grid(boxed(SOLUTION_4), 4) == parse_grid(SOLUTION_4)
    assert answer_grid("no box", 4) is None


@pytest.mark.parametrize(
    "bad", ["123/456/789", "12345/..../..../....", "1234/3412/2143/43a1", "", "1.5./..../..../...."]
)
def test_malformed_puzzle_is_a_user_error(bad):
    with pytest.raises(UserError, match="fix the data"):
        sudoku([boxed(SOLUTION_4)], puzzle=[bad])
