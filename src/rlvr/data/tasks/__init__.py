"""Built-in synthetic tasks with verifiable answers, looked up by name.

Each task's `generate(n, *, split, seed, difficulty) -> list[dict]` returns rows whose
"prompt" is the question and whose other fields (e.g. "answer", or "numbers" and "target")
reach the task's default reward functions as keyword arguments.

>>> sorted(TASKS)
['arithmetic', 'countdown']
>>> get_task("arithmetic").default_rewards
(('math_accuracy', 1.0), ('boxed_format', 0.1))
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

from rlvr.data.tasks import arithmetic, countdown
from rlvr.errors import UserError


@dataclass(frozen=True)
class Task:
    """A built-in task: its generator and the rewards that score it unless the config says otherwise."""

    name: str
    generate: Callable[..., list[dict]]  # (n, *, split="train", seed=0, difficulty=1) -> rows
    default_rewards: tuple[tuple[str, float], ...]  # (reward function name, weight); names from rlvr.rewards
    description: str
    accuracy_rewards: tuple[str, str]  # (strict, lenient) correctness checks used for held-out evaluation


TASKS: dict[str, Task] = {
    "arithmetic": Task(
        name="arithmetic",
        generate=arithmetic.generate,
        default_rewards=(("math_accuracy", 1.0), ("boxed_format", 0.1)),
        description="integer arithmetic, difficulty 1-4: one-digit sums up to three-term + - * expressions",
        accuracy_rewards=("math_accuracy", "math_accuracy_lenient"),
    ),
    "countdown": Task(
        name="countdown",
        generate=countdown.generate,
        default_rewards=(("countdown", 1.0), ("boxed_format", 0.1)),
        description="reach a target with 3-5 numbers, each used once, and + - * /; difficulty 1-3",
        accuracy_rewards=("countdown", "countdown"),
    ),
}


def get_task(name: str) -> Task:
    """The built-in task called `name`; a UserError suggests the nearest name for a typo.

    >>> get_task("countdown").name
    'countdown'
    >>> get_task("arithmatic")
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: unknown task 'arithmatic'; did you mean 'arithmetic'? Built-in tasks: arithmetic, countdown
    """
    if name in TASKS:
        return TASKS[name]
    close = difflib.get_close_matches(name, TASKS, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UserError(f"unknown task {name!r}; {hint}Built-in tasks: {', '.join(TASKS)}")
