"""reasoning-gym's procedural tasks as rlvr tasks: `data.train: reasoning_gym:chain_sum`.

reasoning-gym (Stojanovski et al., 2025, https://github.com/open-thought/reasoning-gym) generates ~100 tasks
with verifiers of their own (`pip install reasoning-gym`). A source names the task and, after a `?`, settings
of its generator (the fields of its config class) that override the rest:

    reasoning_gym:chain_sum                          level 1 of its curriculum (data.difficulty: 1)
    reasoning_gym:chain_sum?max_terms=4&max_digits=2

`difficulty` N is level N of the task's curriculum (reasoning-gym's `set_global_level(N - 1)`); a task with no
curriculum has difficulty 1 only. With data.curriculum the training rows span levels 1..N evenly
(rlvr.rl.build), and rlvr's curriculum by pass rate walks them from the easy ones up. The rows are split into
train and test by a hash of their question (rlvr.data.tasks.splits), so held-out rows are never trained on,
whatever the seeds. A row keeps the task's `answer` and `metadata`, and the `reasoning_gym` reward scores it
with the task's own scorer, partial scores kept (`reasoning_gym_solved`: 1.0 only for a full score, the
held-out verdict).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import random
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

import yaml

from rlvr.data.tasks import splits
from rlvr.errors import UserError, first_line

PREFIX = "reasoning_gym:"
TEST_PERCENT = 20
CHUNK = 64  # rows generated per dataset drawn (each of its own seed)
INSTRUCTION = "Put your final answer in \\boxed{}."


def is_gym(source: str) -> bool:
    """Whether `source` names a reasoning-gym task.

    >>> is_gym("reasoning_gym:chain_sum?max_terms=3"), is_gym("arithmetic")
    (True, False)
    """
    return source.startswith(PREFIX)


@dataclasses.dataclass(frozen=True)
class GymSource:
    """A reasoning-gym task and the settings its source gives its generator."""

    task: str
    settings: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, source: str) -> GymSource:
        """The task and settings of `source`; each setting's value is read as YAML (`4`, `true`, `[1, 2]`).

        >>> GymSource.parse("reasoning_gym:chain_sum?max_terms=4&allow_negation=true")
        GymSource(task='chain_sum', settings=(('max_terms', 4), ('allow_negation', True)))
        """
        name, _, query = source.removeprefix(PREFIX).partition("?")
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
        except ValueError:
            raise UserError(f"{source!r}: settings go after '?' as name=value pairs joined by '&', such as "
                            f"{PREFIX}{name}?max_terms=4&max_digits=2") from None
        return cls(name.strip(), tuple((key, yaml.safe_load(value) if value else None) for key, value in pairs))


def generate(source: str, n: int, *, split: str = "train", seed: int = 0,
             difficulty: int = 1) -> list[dict[str, Any]]:
    """n rows of the reasoning-gym task `source` of one split: distinct questions (train tops up with repeats
    when the task has fewer), deterministic in (source, n, split, seed, difficulty)."""
    gym = GymSource.parse(source)
    splits.check_request(source, n, split, difficulty, range(1, levels(gym.task) + 1))
    rng = splits.make_rng(source, split, seed, difficulty)
    entries = _entries(gym, difficulty, rng)
    found = splits.by_rejection(lambda _: next(entries), n, split, rng, lambda e: str(e["question"]), TEST_PERCENT)
    return [{"prompt": f"{e['question']}\n\n{INSTRUCTION}", "question": e["question"], "answer": e["answer"],
             "metadata": e["metadata"], "task": gym.task, "difficulty": difficulty} for e in found]


def check(source: str, difficulty: int = 1) -> None:
    """Raise a one-line UserError if `source` names no reasoning-gym task, or a setting or `difficulty` its
    generator refuses; quick (it generates one row)."""
    gym = GymSource.parse(source)
    splits.check_request(source, 1, "train", difficulty, range(1, levels(gym.task) + 1))
    next(_entries(gym, difficulty, random.Random(0)))


def levels(task: str) -> int:
    """How many difficulty levels the task's curriculum has (1 when it has none)."""
    curricula = _library().factory.CURRICULA
    if task not in curricula:
        return 1
    return max((len(a.levels) for a in curricula[task]().attributes.values()), default=1)


def _library() -> Any:
    if importlib.util.find_spec("reasoning_gym") is None:
        raise UserError("reasoning_gym: tasks need the reasoning-gym package: pip install reasoning-gym")
    import reasoning_gym

    return reasoning_gym


def _config(gym: GymSource, difficulty: int, seed: int) -> Any:
    """The task's generator config: its curriculum at `difficulty` (or its defaults), the source's settings
    over it; a setting or value it refuses is a UserError."""
    rg = _library()
    if gym.task not in rg.factory.DATASETS:
        close = difflib.get_close_matches(gym.task, rg.factory.DATASETS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(f"reasoning-gym has no task {gym.task!r}; {hint}its tasks: "
                        f"python -c 'import reasoning_gym; print(sorted(reasoning_gym.factory.DATASETS))'")
    _, config_cls = rg.factory.DATASETS[gym.task]
    if gym.task in rg.factory.CURRICULA:
        curriculum = rg.factory.CURRICULA[gym.task]()
        curriculum.set_global_level(difficulty - 1)
        config = curriculum.generate_configuration({"seed": seed, "size": CHUNK})
    else:
        config = config_cls(seed=seed, size=CHUNK)
    fields = {f.name for f in dataclasses.fields(config)} - {"seed", "size"}
    unknown = [key for key, _ in gym.settings if key not in fields]
    if unknown:
        close = difflib.get_close_matches(unknown[0], fields, n=1)
        raise UserError(f"reasoning-gym's {gym.task} has no setting {unknown[0]!r}"
                        f"{f' (did you mean {close[0]!r}?)' if close else ''}; its settings: "
                        f"{', '.join(sorted(fields))}")
    try:
        config = dataclasses.replace(config, **dict(gym.settings))
        if hasattr(config, "validate"):
            config.validate()
    except (AssertionError, ValueError, TypeError) as e:
        raise UserError(f"reasoning-gym's {gym.task} refuses the settings {dict(gym.settings)} at difficulty "
                        f"{difficulty}: {first_line(e) or type(e).__name__}; change them") from None
    return config


def _entries(gym: GymSource, difficulty: int, rng: random.Random) -> Iterator[dict[str, Any]]:
    """The task's entries, endlessly, from datasets of CHUNK rows, each of a seed drawn from `rng`."""
    while True:
        config = _config(gym, difficulty, rng.randrange(2**31))
        dataset_cls, _ = _library().factory.DATASETS[gym.task]
        try:
            dataset = dataset_cls(config=config)
            rows = [dataset[i] for i in range(CHUNK)]
        except (AssertionError, ValueError, TypeError, IndexError) as e:
            raise UserError(f"reasoning-gym's {gym.task} could not generate a problem with the settings "
                            f"{dict(gym.settings)} at difficulty {difficulty}: {first_line(e) or type(e).__name__}"
                            "; change them") from None
        yield from rows
