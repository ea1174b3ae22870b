"""Run several reward functions over N completions and add them up with weights.

Each function is called the way TRL's GRPOTrainer calls it, so TRL reward functions work
unchanged::

    fn(prompts=[...N], completions=[...N], completion_ids=[...N], **columns) -> [...N floats or None]

where every other dataset column arrives as a keyword holding N values. None means "does not
apply to this completion" and adds nothing to the total (NaN is read as None). A function that names
TRL's `trainer_state`, `log_metric` or `log_extra` gets them too (rlvr.rewards.trainer_hooks).

The functions are independent, so they run at the same time: the built-in ones on a thread pool
(the maths reward mostly waits for its worker processes), any other on the calling thread, since
a user's function may rely on being there (math-verify's default timeouts use signal.alarm, which
fails on any other thread), under its time limit (rlvr.deadline). Results, per-function
seconds and errors come back in spec order; a function that raises, or calls sys.exit, is reported
in one line naming it. An async function (`async def`, as TRL's GRPOTrainer takes) is run to its end
(rlvr.rewards.asynchronous).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rlvr.deadline import call_user
from rlvr.errors import UserError
from rlvr.rewards.asynchronous import awaited
from rlvr.rewards.registry import is_builtin
from rlvr.rewards.scores import TRL_KEYWORDS, GradeResult, columns_from_items
from rlvr.rewards.trainer_hooks import RewardLog, StepState


@dataclass(frozen=True)
class RewardSpec:
    """One reward of the config: its name, the function, and its weight in the total."""

    name: str  # as written in the config: the built-in name or "module:function"
    fn: Callable[..., list[float | None]]
    weight: float = 1.0
    timeout_s: float | None = None  # the limit on one call of a user's function (rlvr.deadline)


@dataclass
class RewardResult:
    """The rewards of N completions: the weighted totals and each function's own values."""

    total: list[float]  # N weighted sums, 0.0 where every reward is None
    components: dict[str, list[float | None]]  # name -> N unweighted values, None = not applicable
    seconds: dict[str, float]  # name -> wall time of that function
    reasons: dict[str, list[str] | None]  # name -> N short reasons, when the function gave them (rlvr.rewards.scores)
    logged: dict[str, list[float]] = field(default_factory=dict)  # log_metric: name -> values, in call order
    extra: dict[str, list[Any]] = field(default_factory=dict)  # log_extra: column -> N values


def compute_rewards(
    specs: list[RewardSpec],
    *,
    prompts: list[Any],
    completions: list[Any],
    completion_ids: list[list[int]],
    columns: dict[str, list[Any]],
    state: StepState | None = None,
) -> RewardResult:
    """Call every reward function on the N completions and sum the results with their weights. `state`: the
    training step they are scored for (rlvr.rewards.trainer_hooks; None: outside training).

    >>> def length(completions, **kwargs):
    ...     return [float(len(c)) for c in completions]
    >>> def is_four(completions, answer, **kwargs):
    ...     return [None if a == "" else float(c == a) for c, a in zip(completions, answer)]
    >>> result = compute_rewards(
    ...     [RewardSpec("length", length, 0.5), RewardSpec("is_four", is_four)],
    ...     prompts=["2+2=", "2+2=", "1+1="], completions=["4", "five", "2"],
    ...     completion_ids=[[19], [20, 21], [17]], columns={"answer": ["4", "4", ""]},
    ... )
    >>> result.total, result.components["is_four"]
    ([1.5, 2.0, 0.5], [1.0, 0.0, None])
    """
    n = len(completions)
    _check_inputs(specs, n, prompts, completion_ids, columns)
    kwargs = {"prompts": prompts, "completions": completions, "completion_ids": completion_ids, **columns}
    log = RewardLog(n)
    outcomes = _call_all(specs, kwargs, log, state)
    components: dict[str, list[float | None]] = {}
    seconds: dict[str, float] = {}
    reasons: dict[str, list[str] | None] = {}
    for spec in specs:  # spec order, so the first failing reward in the config is the one reported
        raw, seconds[spec.name], error = outcomes[spec.name]
        if isinstance(error, UserError):  # already one line naming the cause and the fix (a bad row, a judge down)
            raise error
        if error is not None:  # any other failure in user code becomes one readable line
            raise UserError(
                f"reward function '{spec.name}' raised {type(error).__name__}: {error} "
                "(fix the function, or return None for completions it cannot score)"
            ) from error
        components[spec.name] = validated(spec.name, raw, n)
        reasons[spec.name] = getattr(raw, "reasons", None)
    total = [
        sum(spec.weight * v for spec in specs if (v := components[spec.name][i]) is not None)
        for i in range(n)
    ]
    return RewardResult(total=[float(t) for t in total], components=components, seconds=seconds, reasons=reasons,
                        logged=log.metrics, extra=log.extra)


_Outcome = tuple[Any, float, Exception | None]  # (returned value, wall seconds, exception raised)
EXIT_FIX = ("a reward must return one value per completion: return None for completions it cannot score, or raise "
            "an exception")


def _call_all(specs: list[RewardSpec], kwargs: dict[str, Any], log: RewardLog,
              state: StepState | None) -> dict[str, _Outcome]:
    """Every spec's outcome by name: built-ins on a thread pool, the others meanwhile on this thread."""
    pooled = [spec for spec in specs if len(specs) > 1 and is_builtin(spec.fn)]
    if not pooled:
        return {spec.name: _timed_call(spec, kwargs, log, state) for spec in specs}
    with ThreadPoolExecutor(max_workers=len(pooled), thread_name_prefix="reward") as executor:
        futures = {spec.name: executor.submit(_timed_call, spec, kwargs, log, state) for spec in pooled}
        outcomes = {spec.name: _timed_call(spec, kwargs, log, state) for spec in specs if spec.name not in futures}
        outcomes.update({name: future.result() for name, future in futures.items()})
    return outcomes


def _own_copy(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A reward's own copy of its inputs, so that an edit in place cannot reach the next reward's: deep where the
    values allow it, else each list copied (a column of objects that cannot be copied stays shared)."""
    try:
        return copy.deepcopy(kwargs)
    except Exception:  # (a dataset column of objects deepcopy refuses)
        return {k: list(v) if isinstance(v, list) else v for k, v in kwargs.items()}


def _timed_call(spec: RewardSpec, kwargs: dict[str, Any], log: RewardLog, state: StepState | None) -> _Outcome:
    start = time.perf_counter()
    own = {**_own_copy(kwargs), **log.hooks(spec.name, spec.fn, state)}
    try:
        raw, error = call_user(f"reward function '{spec.name}'", lambda: awaited(spec.fn(**own)), spec.timeout_s,
                               "rewards[].timeout_s", EXIT_FIX), None
    except Exception as e:  # reported, with the reward's name, by compute_rewards
        raw, error = None, e
    return raw, time.perf_counter() - start, error


def _check_inputs(
    specs: list[RewardSpec],
    n: int,
    prompts: list[Any],
    completion_ids: list[list[int]],
    columns: dict[str, list[Any]],
) -> None:
    names = [spec.name for spec in specs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise UserError(f"reward '{duplicates[0]}' is listed twice (list each reward once, with one weight)")
    clashes = [key for key in columns if key in TRL_KEYWORDS]
    if clashes:
        raise UserError(
            f"dataset column '{clashes[0]}' clashes with a reward function argument (rename that column)"
        )
    # Mismatched lengths here are a bug in the caller, not a user mistake.
    lengths = {"prompts": len(prompts), "completion_ids": len(completion_ids)}
    lengths.update({f"column '{key}'": len(values) for key, values in columns.items()})
    wrong = {what: length for what, length in lengths.items() if length != n}
    if wrong:
        raise ValueError(f"expected {n} values (one per completion) in each input, got {wrong}")


def validated(name: str, raw: Any, n: int) -> list[float | None]:
    """`raw` as N floats or None; a UserError naming the reward if it is anything else."""
    values = raw.tolist() if hasattr(raw, "tolist") else raw  # numpy arrays, torch tensors
    if not isinstance(values, Sequence) or isinstance(values, (str, bytes)):
        raise UserError(
            f"reward function '{name}' returned {_describe(raw)}, not a list of {n} floats "
            "(return one float or None per completion)"
        )
    if len(values) != n:
        raise UserError(
            f"reward function '{name}' returned {len(values)} values for {n} completions "
            "(return one float or None per completion)"
        )
    return [_as_reward(name, value, i) for i, value in enumerate(values)]


def _as_reward(name: str, value: Any, index: int) -> float | None:
    if value is None:
        return None
    number = None
    if not isinstance(value, (str, bytes)) and hasattr(value, "__float__"):
        try:
            number = float(value)  # also numpy and one-element torch scalars
        except (TypeError, ValueError):
            number = None
    if number is None or math.isinf(number):
        # inf would turn the group's mean and std, and so every advantage in it, into NaN.
        raise UserError(
            f"reward function '{name}' returned {_describe(value)} for completion {index} "
            "(return a finite float, or None when the reward does not apply)"
        )
    return None if math.isnan(number) else number


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def grade_rows(name: str, fn: Callable[..., Any], completions: list[Any],
               items: list[dict[str, Any]]) -> list[GradeResult]:
    """Reward `fn` (labelled `name`) on completions of rows given as dicts, with a reason for each
    (the function's own, or its value when it gives none). The rows' `prompt` field is the prompt.

    >>> from rlvr.rewards.math import math_accuracy
    >>> grade_rows("math", math_accuracy, [r"\\boxed{4}"], [{"answer": "4"}])
    [GradeResult(reward=1.0, reason="answer '4' matches")]
    """
    columns = columns_from_items(items)
    prompts = columns.pop("prompt", [None] * len(completions))
    result = compute_rewards([RewardSpec(name, fn)], prompts=prompts, completions=completions,
                             completion_ids=[[] for _ in completions], columns=columns)
    values, reasons = result.components[name], result.reasons[name]
    return [GradeResult(v, reasons[i] if reasons is not None else f"{name}: {v}") for i, v in enumerate(values)]
