"""Built-in countdown task: solvable puzzles, disjoint splits, determinism, difficulty."""

import itertools
import random
import re
from functools import cache

import pytest

from rlvr.data.tasks import countdown
from rlvr.data.tasks.countdown import generate
from rlvr.errors import UserError
from rlvr.rewards.countdown import countdown as countdown_reward


def reachable(numbers: tuple[int, ...]) -> set[int]:
    """Every positive integer reachable using each number exactly once (slow, obvious reference).

    Looser than the generator on purpose (it also allows / 1), so it must find every target.
    """

    @cache
    def values(indices: frozenset[int]) -> frozenset[int]:
        if len(indices) == 1:
            return frozenset(numbers[i] for i in indices)
        out: set[int] = set()
        items = sorted(indices)
        for size in range(1, len(items)):
            for left in itertools.combinations(items, size):
                right = indices - set(left)
                if min(left) != items[0]:
                    continue  # each unordered split once; both orders are tried below
                for x in values(frozenset(left)):
                    for y in values(right):
                        out |= {x + y, x * y, abs(x - y)} - {0}
                        big, small = max(x, y), min(x, y)
                        if big % small == 0:
                            out.add(big // small)
        return frozenset(out)

    return set(values(frozenset(range(len(numbers)))))


def test_reference_solver_on_hand_checked_cases():
    assert reachable((2, 3)) == {1, 5, 6}  # 2 / 3 and 3 / 2 are not exact
    assert reachable((1, 1, 1)) == {1, 2, 3}  # 1 - 1 = 0 is not a positive intermediate
    assert 150 in reachable((4, 25, 50)) and 1000 not in reachable((4, 25, 50))


def canonical(row: dict) -> tuple:
    return tuple(sorted(row["numbers"])), row["target"]


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_train_and_test_share_no_problem(difficulty):
    train = {canonical(r) for r in generate(1000, split="train", seed=1, difficulty=difficulty)}
    test = {canonical(r) for r in generate(1000, split="test", seed=2, difficulty=difficulty)}
    assert len(train) == len(test) == 1000
    assert not train & test


@pytest.mark.parametrize(("difficulty", "count"), [(1, 3), (2, 4), (3, 5)])
def test_difficulty_sets_how_many_numbers(difficulty, count):
    for row in generate(100, split="test", seed=4, difficulty=difficulty):
        numbers = row["numbers"]
        assert len(numbers) == len(set(numbers)) == count
        if difficulty == 1:
            assert all(1 <= x <= 25 for x in numbers)
        else:
            assert all(1 <= x <= 25 or x in countdown.LARGE for x in numbers)
            assert any(x in countdown.LARGE for x in numbers)
            assert sum(x > 25 for x in numbers) <= 1
        assert 1 <= row["target"] <= 1000
        assert row["difficulty"] == difficulty and row["task"] == "countdown"


@pytest.mark.parametrize(("difficulty", "n"), [(1, 60), (2, 30), (3, 5)])
def test_targets_are_reachable_with_each_number_once(difficulty, n):
    for split in ("train", "test"):
        for row in generate(n, split=split, seed=5, difficulty=difficulty):
            assert row["target"] in reachable(tuple(row["numbers"])), row


def test_construction_uses_each_number_once_and_evaluates_to_its_value():
    rng = random.Random(0)
    for difficulty in (1, 2, 3):
        for _ in range(100):
            numbers, target, solution = countdown.draw(difficulty, rng)
            assert sorted(int(x) for x in re.findall(r"\d+", solution)) == sorted(numbers)
            assert eval(solution) == target  # trusted generated text, tests only


def test_prompt_names_numbers_and_target():
    row = generate(1, seed=3, difficulty=2)[0]
    listed = ", ".join(map(str, row["numbers"]))
    assert row["prompt"] == (
        f"Using the numbers [{listed}], each exactly once, and the operations + - * /, "
        f"make {row['target']}. Put the expression in \\boxed{{}}."
    )


def test_same_seed_same_rows_other_seed_other_rows():
    assert generate(30, seed=1, difficulty=2) == generate(30, seed=1, difficulty=2)
    assert generate(30, seed=1, difficulty=2) != generate(30, seed=2, difficulty=2)


def test_unknown_difficulty_is_a_user_error():
    with pytest.raises(UserError, match="difficulty 4 is unknown; use one of 1, 2, 3"):
        generate(3, difficulty=4)


STEP = re.compile(r"(\d+) ([-+*/]) (\d+) = (\d+)\.")


@pytest.mark.parametrize(("difficulty", "n"), [(1, 200), (2, 40), (3, 10)])
def test_worked_solution_of_every_puzzle_scores_and_every_step_is_right(difficulty, n):
    for row in generate(n, split="train", seed=6, difficulty=difficulty):
        text = countdown.worked(row["numbers"], row["target"])
        assert text is not None, row
        assert countdown_reward([text], numbers=[row["numbers"]], target=[row["target"]])[0] == 1.0, (row, text)
        steps = STEP.findall(text)
        assert len(steps) == difficulty + 1  # one operation per number joined
        for x, op, y, value in steps:
            x, y, value = int(x), int(y), int(value)
            assert value == {"+": x + y, "-": x - y, "*": x * y, "/": x / y}[op] > 0, text
        assert int(steps[-1][3]) == row["target"]


def test_worked_solution_is_none_exactly_when_the_target_is_unreachable():
    numbers = (3, 7, 25)  # no 1 among them or their pairwise values, so the reference's / 1 adds nothing
    solved = {target for target in range(1, 1001) if countdown.worked(numbers, target) is not None}
    assert solved == reachable(numbers)


def test_the_example_exchange_is_a_train_puzzle_worked_as_the_cold_start_data_is():
    from rlvr.data.tasks import TASKS, splits

    (question, answer), = TASKS["countdown"].few_shot
    numbers = tuple(int(x) for x in re.search(r"\[(.*?)\]", question).group(1).split(", "))
    target = int(re.search(r"make (\d+)\.", question).group(1))
    assert splits.split_of(countdown.canonical((numbers, target, "")), countdown.TEST_PERCENT) == "train"
    assert question == countdown.prompt(numbers, target) and answer == countdown.worked(numbers, target)
    assert countdown_reward([answer], numbers=[list(numbers)], target=[target])[0] == 1.0
