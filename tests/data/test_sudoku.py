"""Sudoku task: valid, uniquely solvable puzzles with the promised blanks, disjoint splits."""

import itertools
import random

import pytest

from rlvr.data.tasks import sudoku
from rlvr.data.tasks.grids import parse_grid
from rlvr.data.tasks.sudoku import count_solutions, full_grid, generate
from rlvr.errors import UserError
from rlvr.rewards.puzzles import sudoku as sudoku_reward
from rlvr.rewards.puzzles import violations


def brute_force_solutions(puzzle: list[list[int]]) -> int:
    """Every filling of the blanks checked against every rule: slow and obvious (4x4 only)."""
    blanks = [(r, c) for r in range(4) for c in range(4) if not puzzle[r][c]]
    found = 0
    for digits in itertools.product(range(1, 5), repeat=len(blanks)):
        grid = [row[:] for row in puzzle]
        for (r, c), d in zip(blanks, digits):
            grid[r][c] = d
        found += not violations(grid, puzzle)
    return found


def test_solver_agrees_with_brute_force():
    rng = random.Random(0)
    counts = []
    for _ in range(10):
        grid = full_grid(4, rng)
        for r, c in rng.sample([(r, c) for r in range(4) for c in range(4)], 6):
            grid[r][c] = 0
        counts.append(brute_force_solutions(grid))
        assert count_solutions([row[:] for row in grid], limit=1000) == counts[-1]
    assert max(counts) > 1  # the sample includes a puzzle with several solutions


def test_full_grids_are_valid():
    rng = random.Random(1)
    for size in (4, 6):
        for _ in range(20):
            grid = full_grid(size, rng)
            assert violations(grid, [[0] * size for _ in range(size)]) == []


@pytest.mark.parametrize(("difficulty", "size", "blanks"), [(1, 4, 6), (2, 4, 10), (3, 6, 14), (4, 6, 22)])
def test_puzzles_have_the_blanks_and_exactly_one_solution(difficulty, size, blanks):
    for row in generate(15, split="test", seed=3, difficulty=difficulty):
        puzzle, solution = parse_grid(row["puzzle"]), parse_grid(row["solution"])
        assert len(puzzle) == size and row["puzzle"].count(".") == blanks
        assert violations(solution, puzzle) == []
        assert count_solutions(puzzle, limit=10) == 1
        assert sudoku_reward([rf"\boxed{{{row['solution']}}}"], puzzle=[row["puzzle"]]) == [1.0]


@pytest.mark.parametrize("difficulty", [1, 3])
def test_train_and_test_share_no_puzzle(difficulty):
    train = {r["puzzle"] for r in generate(200, split="train", seed=1, difficulty=difficulty)}
    test = {r["puzzle"] for r in generate(200, split="test", seed=2, difficulty=difficulty)}
    assert len(train) == len(test) == 200
    assert not train & test


def test_prompt_shows_the_grid_and_the_answer_format():
    row = generate(1, seed=0, difficulty=1)[0]
    assert "\n".join(row["puzzle"].split("/")) in row["prompt"]
    assert row["prompt"].endswith(sudoku.INSTRUCTION)
    assert "2x2 box" in row["prompt"]


def test_same_seed_same_rows():
    assert generate(10, seed=1, difficulty=2) == generate(10, seed=1, difficulty=2)
    assert generate(10, seed=1, difficulty=2) != generate(10, seed=2, difficulty=2)


def test_unknown_difficulty_is_a_user_error():
    with pytest.raises(UserError, match="difficulty 5 is unknown; use one of 1, 2, 3, 4"):
        generate(3, difficulty=5)
