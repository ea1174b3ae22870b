"""`rlvr.evaluate_model`: what `rlvr eval` measures, from Python, for any model on any data.

    from rlvr import evaluate_model

    results = evaluate_model("runs/mine", heldout_rows, reward=correct, samples=8)
    results["strict"]["pass@k"]["8"], results["strict"]["pass@1"]["mean"]

The data's own verifier judges the answers where it has one (a benchmark, a built-in task, rows with
`answer` or tests); otherwise `reward`, a function of yours (or a name), counting an answer correct where it
scores `correct_at` or more. Results, samples and report.md are written to `output_dir`, and an evaluation
cut short resumes there.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rlvr.api.inputs import INPUTS, data_file, is_given_in_memory, model_source
from rlvr.api.running import writable_folder
from rlvr.config import EvalConfig, load_command_config
from rlvr.config.loading import canonical
from rlvr.config.yaml_files import deep_merge
from rlvr.console import quiet_libraries
from rlvr.data import find_task
from rlvr.data.scoring import CODE, MATH, verifier_for_columns
from rlvr.data.sources import read_located
from rlvr.errors import UserError, front_door, python_caller
from rlvr.evaluate.benchmarks import MATH_BENCHMARKS
from rlvr.records import Scoring


@front_door
def evaluate_model(model: Any, data: Any, *, reward: Any = None, correct_at: float | None = None, samples: int = 16,
                   tokenizer: Any = None, output_dir: str | Path = "runs/eval",
                   config: EvalConfig | dict[str, Any] | str | Path | None = None, **settings: Any) -> dict[str, Any]:
    """Evaluate `model` (a name, a folder, a run directory, or a loaded transformers model with `tokenizer`) on
    `data` (a benchmark or task name, a file, or rows in memory: a `datasets.Dataset`, a list of dicts);
    returns the summary that `rlvr eval` writes (greedy, pass@1, pass@k, maj@k with 95% intervals).
    `config` is an EvalConfig (or a dict of its keys, or a YAML file); `**settings` set its keys on top."""
    from rlvr.evaluate.runner import run_eval

    quiet_libraries()
    out = Path(output_dir)
    writable_folder(out)
    if reward is not None and not (callable(reward) or isinstance(reward, (str, Path, dict))):
        raise UserError(f"reward={reward!r} ({type(reward).__name__}) is no reward: give a function with TRL's reward "
                        "signature, a 'file.py:function' name, or a mapping {'name': ..., 'correct_at': ...}")
    given = deep_merge(canonical(EvalConfig, _values(config)), canonical(EvalConfig, settings))
    limit = (given.get("data") or {}).get("limit")
    if type(data).__name__ == "IterableDataset" and limit is None:  # (a stream may not end)
        raise UserError("the data is a stream (IterableDataset), which may not end: give limit=N, how many of its "
                        "problems to evaluate")
    layer: dict[str, Any] = {"output_dir": str(out), "samples": samples, "data": {"name": _data(data, out, limit)},
                             "model": {"name": model_source(model, tokenizer, out / INPUTS, resume=True)}}
    if reward is not None:
        layer["reward"] = {**canonical(EvalConfig, {"reward": reward})["reward"],
                           **({"correct_at": correct_at} if correct_at is not None else {})}
    values = deep_merge(given, layer)
    with python_caller():
        return run_eval(load_command_config(EvalConfig, values=values))


def verifier_of(data: Any) -> Scoring | None:
    """The verifier `data` brings (a benchmark's, a task's, or its rows' by their columns); None when it has none."""
    task = find_task(str(data)) if isinstance(data, (str, Path)) else None
    if task is not None:
        return task.scoring
    if isinstance(data, (str, Path)) and (str(data) in MATH_BENCHMARKS or str(data) == "humaneval"):
        return MATH if str(data) in MATH_BENCHMARKS else CODE
    if is_given_in_memory(data):
        first = next(iter(data), None)
    else:
        first = next((row for _, row in read_located(str(data), split="test", seed=0, difficulty=1, limit=1)), None)
    return verifier_for_columns(first) if isinstance(first, dict) else None


def _data(data: Any, out: Path, limit: int | None) -> str:
    """The data as a name the config holds: rows in memory written to OUT/inputs/eval.jsonl first (of a stream,
    the first `limit`)."""
    return data_file(data, out / INPUTS, "eval", limit=limit or 10_000_000, resume=True) or ""


def _values(config: EvalConfig | dict[str, Any] | str | Path | None) -> dict[str, Any]:
    if config is None:
        return {}
    if isinstance(config, EvalConfig):
        return dataclasses.asdict(config)
    if isinstance(config, (str, Path)):
        return dataclasses.asdict(load_command_config(EvalConfig, config))
    return dict(config)

