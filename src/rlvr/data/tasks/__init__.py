"""Built-in synthetic tasks with verifiable answers, looked up by name.

Each task's `generate(n, *, split, seed, difficulty) -> list[dict]` returns rows whose
"prompt" is the question and whose other fields (e.g. "answer", or "numbers" and "target")
reach the task's default reward functions as keyword arguments.

>>> sorted(TASKS)
['arithmetic', 'countdown', 'game24', 'sudoku']
>>> get_task("arithmetic").scoring.rewards
(('math_accuracy', 1.0), ('boxed_format', 0.1))
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.data.scoring import MATH
from rlvr.data.tasks import arithmetic, countdown, game24, gym, sudoku
from rlvr.errors import UserError
from rlvr.records import Scoring


@dataclass(frozen=True)
class Task:
    """A built-in task: its generator and how its rows are scored (unless the config says otherwise)."""

    name: str
    generate: Callable[..., list[dict[str, Any]]]  # (n, *, split="train", seed=0, difficulty=1) -> rows
    scoring: Scoring
    description: str
    few_shot: tuple[tuple[str, str], ...] = ()  # (prompt, completion) example exchanges shown before each prompt
    few_shot_share: float = 1.0  # the share of training prompts shown them (data.few_shot_share left unset)


def puzzle(check: str, description: str) -> Scoring:
    """A puzzle has one way to read an answer: its check is both the strict and the lenient one."""
    return Scoring(rewards=((check, 1.0), ("boxed_format", 0.1)), strict=check, lenient=check,
                   extraction=(description,) * 2)


COUNTDOWN = "reach a target with 3-5 numbers, each used once, and + - * /; difficulty 1-3"
GAME24 = "make 24 from four numbers 1-13, each used once; difficulty 1-3: many, few, fractions only"
SUDOKU = "fill a mini Sudoku with one solution; difficulty 1-4: 4x4, 6 or 10 blanks; 6x6, 14 or 22"

GYM_SCORING = Scoring(
    rewards=(("reasoning_gym", 1.0), ("boxed_format", 0.1)),
    strict="reasoning_gym_solved",
    lenient="reasoning_gym_solved",
    extraction=("the last \\boxed{} (else the last <answer>), judged by the task's own scorer: full marks",) * 2,
)

TASKS: dict[str, Task] = {
    "arithmetic": Task(
        name="arithmetic",
        generate=arithmetic.generate,
        scoring=MATH,
        description=("integer arithmetic, difficulty 1-5: one-digit sums up to three-term + - * expressions, "
                     "and three-digit times two-digit products"),
        # One exchange that shows the answer format and nothing else: a bare \boxed{N}, no working.
        # 10 + 10 lies outside every difficulty-1 problem, so it leaks no held-out answer.
        few_shot=(("What is 10 + 10? Put your final answer in \\boxed{}.", "\\boxed{20}"),),
        # Shown with 4 training prompts in 5, the format is learned, not only copied: asked without the example
        # the trained model boxes its answers (strict 0% -> 79%), and with it scores within the spread of runs
        # that always showed it (docs/learning.md, "The answer format without the example").
        few_shot_share=0.8,
    ),
    "countdown": Task(
        name="countdown",
        generate=countdown.generate,
        scoring=puzzle("countdown", COUNTDOWN),
        description=COUNTDOWN,
        # One train-split puzzle (its split key is not a test one) worked the way countdown.worked writes
        # solutions: an operation a sentence, then the expression boxed (the format configs/countdown_sft.yaml teaches).
        few_shot=((countdown.prompt((20, 24, 12), 40), countdown.worked((20, 24, 12), 40) or ""),),
    ),
    "game24": Task(
        name="game24",
        generate=game24.generate,
        scoring=puzzle("countdown", GAME24),
        description=GAME24,
    ),
    "sudoku": Task(
        name="sudoku",
        generate=sudoku.generate,
        scoring=puzzle("sudoku", SUDOKU),
        description=SUDOKU,
    ),
}


def find_task(name: str) -> Task | None:
    """The task a data source names: a built-in one, or a reasoning-gym task (`reasoning_gym:<task>[?settings]`,
    rlvr.data.tasks.gym, checked here: an unknown task or a refused setting is a UserError); None for any
    other source (a file, hf:...).

    >>> find_task("countdown").name, find_task("train.jsonl")
    ('countdown', None)
    """
    if name in TASKS:
        return TASKS[name]
    return _gym_task(name) if gym.is_gym(name) else None


@functools.cache
def _gym_task(name: str) -> Task:
    gym.check(name)
    task = gym.GymSource.parse(name).task
    return Task(name=name, generate=functools.partial(gym.generate, name), scoring=GYM_SCORING,
                description=f"reasoning-gym's {task}, difficulty 1-{gym.levels(task)}")


def get_task(name: str) -> Task:
    """The built-in task called `name`; a UserError suggests the nearest name for a typo.

    >>> get_task("countdown").name
    'countdown'
    >>> get_task("arithmatic")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: unknown task 'arithmatic'; did you mean 'arithmetic'? Built-in tasks: arithmetic, ...
    """
    if name in TASKS:
        return TASKS[name]
    close = difflib.get_close_matches(name, TASKS, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UserError(f"unknown task {name!r}; {hint}Built-in tasks: {', '.join(TASKS)}")
