"""Built-in arithmetic task: disjoint splits, correct answers, seeded determinism, difficulty."""

import random
import re

import pytest

from rlvr.data.tasks import arithmetic
from rlvr.data.tasks.arithmetic import INSTRUCTION, evaluate, generate
from rlvr.errors import UserError

QUESTION = re.compile(r"What is (.+)\? " + re.escape(INSTRUCTION) + "$")


def expression_of(row: dict) -> str:
    match = QUESTION.fullmatch(row["prompt"])
    assert match, row["prompt"]
    return match.group(1)


def numbers_of(row: dict) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", expression_of(row))]


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_train_and_test_share_no_problem(difficulty):
    train = {expression_of(r) for r in generate(1500, split="train", seed=1, difficulty=difficulty)}
    test = {expression_of(r) for r in generate(1500, split="test", seed=2, difficulty=difficulty)}
    assert train and test
    assert not train & test


def test_difficulty_1_splits_cover_all_100_problems():
    train = {expression_of(r) for r in generate(5000, split="train", difficulty=1)}
    test = {expression_of(r) for r in generate(5000, split="test", difficulty=1)}
    assert len(train | test) == 100
    assert 20 <= len(test) <= 40  # ~30% held out


def test_test_split_returns_each_problem_once_when_n_exceeds_it():
    rows = generate(1000, split="test", difficulty=1)
    assert len(rows) < 100
    assert len({r["prompt"] for r in rows}) == len(rows)


def test_train_split_repeats_problems_to_reach_n():
    rows = generate(500, split="train", difficulty=1)
    assert len(rows) == 500
    assert len({r["prompt"] for r in rows}) < 100


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_answers_are_correct(difficulty):
    for split in ("train", "test"):
        for row in generate(200, split=split, seed=3, difficulty=difficulty):
            assert row["answer"] == str(eval(expression_of(row)))  # trusted generated text, tests only
            assert row["difficulty"] == difficulty and row["task"] == "arithmetic"


def test_evaluate_matches_python_precedence():
    rng = random.Random(0)
    for _ in range(500):
        problem = (tuple(rng.randint(0, 99) for _ in range(3)), tuple(rng.choice("+-*") for _ in range(2)))
        assert evaluate(problem) == eval(arithmetic.expression(problem))


def test_same_seed_same_rows_other_seed_other_order():
    for difficulty in (1, 4):
        a = generate(50, seed=7, difficulty=difficulty)
        assert a == generate(50, seed=7, difficulty=difficulty)
        assert a != generate(50, seed=8, difficulty=difficulty)
    test_a = generate(1000, split="test", seed=0, difficulty=1)
    test_b = generate(1000, split="test", seed=1, difficulty=1)
    assert test_a != test_b and sorted(map(str, test_a)) == sorted(map(str, test_b))


def test_difficulty_sets_problem_size():
    d1 = generate(100, difficulty=1)
    assert all(" + " in expression_of(r) and max(numbers_of(r)) <= 9 for r in d1)
    d2 = generate(100, difficulty=2)
    assert all(" + " in expression_of(r) and all(10 <= x <= 99 for x in numbers_of(r)) for r in d2)
    d3 = generate(100, difficulty=3)
    for row in d3:
        a, b = numbers_of(row)
        assert expression_of(row) == f"{a} * {b}" and 10 <= a <= 99 and 2 <= b <= 9
    d4 = generate(300, difficulty=4)
    assert all(len(numbers_of(r)) == 3 and max(numbers_of(r)) <= 99 for r in d4)
    assert any(int(r["answer"]) < 0 for r in d4)
    assert {op for r in d4 for op in re.findall(r" ([-+*]) ", r["prompt"])} == {"+", "-", "*"}
    for row in generate(100, difficulty=5):
        a, b = numbers_of(row)
        assert expression_of(row) == f"{a} * {b}" and 100 <= a <= 999 and 10 <= b <= 99


def test_prompt_is_plain_ascii_with_the_instruction():
    for row in generate(20, difficulty=4):
        assert row["prompt"].isascii()
        assert row["prompt"].endswith("Put your final answer in \\boxed{}.")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"difficulty": 6}, "difficulty 6 is unknown; use one of 1, 2, 3, 4, 5"),
        ({"split": "validation"}, "split 'validation' is unknown"),
        ({"n": -1}, "n=-1 is negative"),
    ],
)
def test_bad_requests_are_user_errors(kwargs, message):
    with pytest.raises(UserError, match=re.escape(message)):
        generate(**{"n": 3, **kwargs})
