"""What TRL's GRPOTrainer hands a reward besides the rows and completions, for a reward that names it:

    trainer_state              transformers' TrainerState of the step the completions train: `global_step` (the
                               optimizer steps before it, TRL's count), `max_steps`, `epoch`; for rewards shaped
                               over training (a length penalty that grows, a schedule of their own)
    log_metric(name, value)    a number, averaged over the step's calls (every rank's) and logged as `name`
    log_extra(column, values)  one value per completion, kept with the completions in samples.jsonl

The state is the batch's own step, known before the batch is sampled, so a batch sampled ahead
(`sampling.max_staleness`) or sampled again after a resume is scored with the state the unbroken synchronous
run gives it, and a reward that reads the state keeps resumes exact. For the same reason its `log_history`
is empty: when a batch is sampled ahead, the metrics of the steps before it do not exist yet. Outside a
training step (held-out evaluation, `rlvr eval`, `rlvr grade`) a reward gets an empty TrainerState
(`global_step` 0), and what it logs is not kept.

Only a reward whose signature names a keyword receives it (TRL passes all of them to every reward: one that
reads them from **kwargs gets nothing here).
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlvr.errors import UserError

HOOKS = ("trainer_state", "log_metric", "log_extra")


@dataclass(frozen=True)
class StepState:
    """Where training stands for the batch being scored: what rlvr knows of TrainerState before sampling it."""

    global_step: int  # optimizer steps before this batch's (TRL's count: batches × algorithm.updates_per_batch)
    max_steps: int  # optimizer steps in the whole run
    epoch: float  # passes over the training rows before this batch (batches × prompts a batch / rows)
    is_main: bool = True  # rank 0 (TrainerState.is_world_process_zero)

    def trainer_state(self) -> Any:
        """A fresh transformers TrainerState with these values (a reward may keep or edit its own)."""
        from transformers.trainer_callback import TrainerState

        return TrainerState(global_step=self.global_step, max_steps=self.max_steps, epoch=self.epoch,
                            is_local_process_zero=self.is_main, is_world_process_zero=self.is_main)


def step_state(batch: int, max_steps: int, updates_per_batch: int, prompts_per_batch: int, rows: int,
               is_main: bool) -> StepState:
    """The state of batch `batch` (0-based: what step `batch` + 1 trains on) of a run of `max_steps` steps.

    >>> step_state(3, 10, 2, 4, 16, True)
    StepState(global_step=6, max_steps=20, epoch=0.75, is_main=True)
    """
    return StepState(batch * updates_per_batch, max_steps * updates_per_batch, batch * prompts_per_batch / rows,
                     is_main)


def hooks_taken(fn: Callable[..., Any]) -> list[str]:
    """The HOOKS `fn` names as keyword parameters (a router's function: the one it routes to).

    >>> def shaped(completions, trainer_state, log_metric=None, **kwargs): ...
    >>> hooks_taken(shaped)
    ['trainer_state', 'log_metric']
    """
    try:
        parameters = inspect.signature(fn).parameters  # (follows functools.wraps, as required_columns does)
    except (TypeError, ValueError):  # (no readable signature: it is given none)
        return []
    return [h for h in HOOKS if h in parameters and parameters[h].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                                           inspect.Parameter.KEYWORD_ONLY)]


class RewardLog:
    """What the rewards of one call on `n` completions logged: metric values by name in call order, and extra
    columns of `n` values each (None where a routed reward skipped the row)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.metrics: dict[str, list[float]] = {}
        self.extra: dict[str, list[Any]] = {}
        self._lock = threading.Lock()  # (a reward under a time limit runs on a thread of its own)

    def hooks(self, reward: str, fn: Callable[..., Any], state: StepState | None) -> dict[str, Any]:
        """The keyword arguments `fn` (the reward named `reward`) takes of HOOKS, bound to this log and `state`
        (None: outside a training step)."""
        taken = hooks_taken(fn)
        given: dict[str, Any] = {"log_metric": functools.partial(self.log_metric, reward),
                                 "log_extra": functools.partial(self.log_extra, reward)}
        if "trainer_state" in taken:  # (made only for a reward that reads it: a fresh one each call)
            given["trainer_state"] = state.trainer_state() if state is not None else _empty_state()
        return {hook: given[hook] for hook in taken}

    def log_metric(self, reward: str, name: Any, value: Any) -> None:
        number = _finite(value)
        if not isinstance(name, str) or not name or number is None:
            raise UserError(f"reward '{reward}' called log_metric({name!r}, {value!r}): it takes a metric's name "
                            "and a finite number")
        with self._lock:
            self.metrics.setdefault(name, []).append(number)

    def log_extra(self, reward: str, column: Any, values: Any) -> None:
        said = f"reward '{reward}' called log_extra({column!r}, ...)"
        if not isinstance(column, str) or not column:
            raise UserError(f"{said}: it takes a column's name and one value per completion")
        if not isinstance(values, Sequence) or isinstance(values, (str, bytes)) or len(values) != self.n:
            raise UserError(f"{said} with {_count(values)} for {self.n} completions: log one value per completion")
        try:
            json.dumps(list(values))
        except (TypeError, ValueError) as e:
            raise UserError(f"{said}: its values must be JSON (numbers, strings, lists, dicts), for samples.jsonl "
                            f"({e})") from None
        with self._lock:
            if column in self.extra:
                raise UserError(f"{said}: the column was already logged for these completions; log each column "
                                "once a call, under a name of its own")
            self.extra[column] = list(values)


def scattered(log_extra: Callable[[str, Any], None], rows: list[int], n: int) -> Callable[[str, Any], None]:
    """`log_extra` for a routed reward called on `rows` of `n` completions (rlvr.rewards.routing): its values
    are put back at their rows, None at the others.

    >>> got = {}
    >>> scattered(lambda column, values: got.update({column: values}), [0, 2], 3)("why", ["a", "b"])
    >>> got
    {'why': ['a', None, 'b']}
    """
    def log(column: str, values: Any) -> None:
        if isinstance(values, Sequence) and not isinstance(values, (str, bytes)) and len(values) == len(rows):
            full: list[Any] = [None] * n
            for i, value in zip(rows, values):
                full[i] = value
            values = full
        log_extra(column, values)  # (anything else: told there, counted against the rows it was given)

    return log


def _empty_state() -> Any:
    from transformers.trainer_callback import TrainerState

    return TrainerState()


def _finite(value: Any) -> float | None:
    """`value` as a finite float (numpy and one-element torch scalars too); None when it is not one."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _count(values: Any) -> str:
    return f"{len(values)} values" if isinstance(values, Sequence) and not isinstance(values, (str, bytes)) else \
        type(values).__name__
