"""The 24 game task: solvable puzzles only, difficulty from a slow reference solver, disjoint splits."""

import itertools
from fractions import Fraction
from functools import cache

import pytest

from rlvr.data.tasks import game24
from rlvr.data.tasks.game24 import difficulty_of, generate, solutions
from rlvr.errors import UserError
from rlvr.rewards.countdown import countdown


def reference(numbers: tuple[int, ...]) -> tuple[bool, bool]:
    """(24 reachable at all, reachable with whole-number steps): slow, obvious, by merging pairs."""

    @cache
    def reach(state: tuple[Fraction, ...], whole: bool) -> bool:
        if len(state) == 1:
            return state[0] == 24
        for i, j in itertools.combinations(range(len(state)), 2):
            a, b = state[i], state[j]
            rest = tuple(x for k, x in enumerate(state) if k not in (i, j))
            results = {a + b, a - b, b - a, a * b} | ({a / b} if b else set()) | ({b / a} if a else set())
            for r in results:
                if (not whole or r.denominator == 1) and reach(tuple(sorted((*rest, r))), whole):
                    return True
        return False

    state = tuple(sorted(Fraction(x) for x in numbers))
    return reach(state, False), reach(state, True)


def test_solution_counts_by_hand():
    assert solutions((1, 1, 1, 1)) == (0, 0)
    assert solutions((6, 6, 6, 6)) == (33, 33)  # e.g. 6+6+6+6, 6*6-6-6, (6+6)*(6+6)/6
    assert solutions((3, 3, 8, 8)) == (4, 0)  # only 8/(3-8/3), up to the order of its parts


def test_classification_agrees_with_the_reference_on_a_sample():
    for numbers in list(itertools.combinations_with_replacement(range(1, 14), 4))[::23]:
        solvable, whole = reference(numbers)
        level = difficulty_of(numbers)
        assert (level is not None) == solvable, numbers
        assert (level == 3) == (solvable and not whole), numbers


def test_well_known_totals():
    levels = game24._levels()
    assert sum(len(levels[d]) for d in (1, 2, 3)) == 1362  # solvable sets of four cards
    assert len(levels[3]) == 16 and (1, 5, 5, 5) in levels[3] and (3, 3, 8, 8) in levels[3]


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_rows_are_solvable_at_their_difficulty_and_splits_disjoint(difficulty):
    train = generate(300, split="train", seed=1, difficulty=difficulty)
    test = generate(300, split="test", seed=2, difficulty=difficulty)
    key = lambda row: tuple(sorted(row["numbers"]))  # noqa: E731
    assert not {key(r) for r in train} & {key(r) for r in test}
    for row in train[:40] + test[:40]:
        assert difficulty_of(key(row)) == difficulty
        assert row["target"] == 24 and row["task"] == "game24" and all(1 <= x <= 13 for x in row["numbers"])


def test_countdown_reward_scores_24_game_rows_with_fractions():
    row = {"numbers": [8, 3, 8, 3], "target": 24}
    completions = [r"\boxed{8/(3-8/3)}", r"\boxed{8*3}", r"\boxed{(8+8)+(3+3)}"]
    assert countdown(completions, numbers=[row["numbers"]] * 3, target=[row["target"]] * 3) == [1.0, 0.0, 0.0]


def test_prompt_and_determinism():
    row = generate(1, seed=3, difficulty=2)[0]
    listed = ", ".join(map(str, row["numbers"]))
    assert row["prompt"].startswith(f"Using the numbers [{listed}], each exactly once")
    assert row["prompt"].endswith("Put the expression in \\boxed{}.")
    assert generate(20, seed=1, difficulty=1) == generate(20, seed=1, difficulty=1)
    assert generate(20, seed=1, difficulty=1) != generate(20, seed=2, difficulty=1)


def test_unknown_difficulty_is_a_user_error():
    with pytest.raises(UserError, match="difficulty 4 is unknown; use one of 1, 2, 3"):
        generate(3, difficulty=4)
