"""Who judges a run's held-out answers, decided before the model loads:

    the data's own verifier (a built-in task's; maths rows with `answer`, code rows with tests)
    else the run's correctness reward, read as a verdict (its score >= its `correct_at`)
    else nobody: the run evaluates no held-out set, and says why (on the console and in summary.json)

The held-out rows are checked to have what the judge reads (math_accuracy's `answer`, your reward's
columns) here, so a mistake costs a second, not a model load and a training run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr import paths
from rlvr.config import TrainConfig
from rlvr.errors import UserError
from rlvr.records import Example, Scoring
from rlvr.rewards import load_reward_function
from rlvr.rewards.registry import required_columns
from rlvr.rewards.routing import as_verdict
from rlvr.rl.reward_setup import RunRewards

Judge = tuple[Callable[..., Any], Callable[..., Any]]  # (strict, lenient): 1.0 / 0.0 / None per completion


@dataclass(frozen=True)
class HeldOut:
    judge: Judge | None  # None: no held-out evaluation
    skipped: str | None  # why there is none, in words (None when there is one)


def heldout_judge(config: TrainConfig, kind: Scoring | None, rewards: RunRewards,
                  rows: list[Example] | None, source: str | None) -> HeldOut:
    """The judge of the held-out `rows` of `source` (see the module docstring), their columns checked."""
    if rows is None:
        return HeldOut(None, f"no held-out prompts: {no_eval_rows(config)}")
    if kind is not None:
        judge: Judge = (load_reward_function(kind.strict), load_reward_function(kind.lenient))
        who = f"the verifier {kind.strict}"
    elif rewards.correctness is not None:
        entry = next(e for e in rewards.entries if e.correctness)
        spec = rewards.specs[rewards.entries.index(entry)]
        verdict = as_verdict(spec.fn, entry.correct_at, spec.name, spec.timeout_s)
        judge, who = (verdict, verdict), f"the correctness reward '{entry.name}'"
    else:
        why = (f"the held-out rows of {source} have no verifier of their own (no `answer` or `tests` column) and no "
               "reward checks answers: mark the one that does correctness: true")
        if config.data.validation_size:
            raise UserError(f"data.validation_size (and keep_best) need held-out answers judged, but {why}")
        return HeldOut(None, why)
    for number, row in enumerate(rows, start=1):
        missing = [c for c in required_columns(judge[0]) if c not in row.columns]
        if missing:
            raise UserError(f"held-out row {number} of {source} has no {missing[0]!r} column, which {who} needs to "
                            f"judge its answer (its columns: {', '.join(sorted(row.columns)) or 'none'}); add it")
    if not (config.eval_before or config.eval_after or config.eval_every):
        return HeldOut(judge, "eval_before and eval_after are false and eval_every is 0")
    return HeldOut(judge, None)


def no_eval_rows(config: TrainConfig) -> str:
    """Why the training source gives no held-out rows, and what gives them, in the words of how it was given."""
    from rlvr.adapters.verifiers_env import PREFIX

    train = config.data.train
    if train.startswith(PREFIX):
        return (f"the verifiers environment {train.removeprefix(PREFIX).split('?')[0]} has no eval_dataset, and "
                "data.eval is not set (give the environment an eval_dataset, or data.eval)")
    if Path(train).parent == Path(config.output_dir) / paths.INPUTS:  # (rows given from Python, kept in the run)
        return "the training rows came from Python, and eval_data was not given (give eval_data=...)"
    return f"data.train is {train}, which has no held-out split, and data.eval is not set (give data.eval)"
