"""A recipe: ordered stages of the DeepSeek-R1 pipeline in one YAML file (DeepSeek-R1, Guo et al. 2025, §2.3).

    name: r1
    model: smollm2                     # where the first stage starts
    eval: {data: arithmetic, samples: 4, limit: 32}    # rlvr eval after every stage that makes a model
    stages:
      - {name: cold_start, kind: sft, config: {data: cold_start.jsonl}}
      - {name: reasoning, kind: grpo, config: {data: {train: arithmetic}, max_steps: 40}}
      - {name: rejection, kind: sample, config: {data: arithmetic, samples: 8}}
      - {name: sft2, kind: sft}        # data: the last `sample` stage's dataset
      - {name: preferences, kind: rm, config: {data: pairs.jsonl}}
      - {name: all_scenarios, kind: grpo, config: {rewards: [{name: reward_model, params: {path: "@preferences"}}]}}

Each stage's `config` holds the fields of its command's config (rlvr sft / train / sample / rm).
What a stage does not set comes from the stages before it: the model is the latest stage's model
(or `model`), an `sft` stage's data is the latest `sample` stage's dataset. Any string "@name" is
replaced by stage `name`'s output (its model directory, or its dataset for a `sample` stage).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.config.yaml_files import read_yaml_file
from rlvr.errors import UserError

KINDS = ("sft", "grpo", "sample", "rm")
REFERENCE = re.compile(r"^@([A-Za-z0-9_\-]+)$")


@dataclass(frozen=True)
class Stage:
    name: str
    kind: str  # one of KINDS
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Recipe:
    name: str
    model: str
    stages: list[Stage]
    eval: dict[str, Any] | None = None  # EvalConfig fields for the evaluation after each model stage
    output_dir: str | None = None
    logging: dict[str, Any] | None = None  # LoggingConfig fields for every training stage (trackers)
    base_dir: Path = Path(".")  # the recipe file's folder: relative data paths are read from there


def load_recipe(path: str | Path) -> Recipe:
    """Read and check a recipe file; every mistake is one line naming the stage and the fix."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"recipe {path} not found (see recipes/ for examples)")
    data = read_yaml_file(path, f"recipe {path}")
    if not isinstance(data, dict):
        raise UserError(f"{path}: a recipe is a mapping with `model` and `stages`")
    unknown = set(data) - {"name", "model", "stages", "eval", "output_dir", "logging"}
    if unknown:
        raise UserError(f"{path}: unknown key {sorted(unknown)[0]!r} "
                        "(a recipe has name, model, eval, output_dir, logging, stages)")
    if not isinstance(data.get("logging") or {}, (dict, str)):
        raise UserError(f"{path}: `logging` must be a mapping such as {{report_to: [wandb]}}")
    raw = data.get("stages")
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{path}: `stages` must be a non-empty list of {{name, kind, config}}")
    stages = [_stage(path, i, s) for i, s in enumerate(raw)]
    _check_names(path, stages)
    return Recipe(name=str(data.get("name", path.stem)), model=str(data.get("model", "smollm2")), stages=stages,
                  eval=data.get("eval"), output_dir=data.get("output_dir"), logging=_logging(data.get("logging")),
                  base_dir=path.parent)


def _logging(value: Any) -> dict[str, Any] | None:
    """`logging: wandb` is `logging: {report_to: [wandb]}`."""
    return {"report_to": [value]} if isinstance(value, str) else value


def _stage(path: Path, index: int, raw: Any) -> Stage:
    if not isinstance(raw, dict) or "kind" not in raw:
        raise UserError(f"{path}: stage {index + 1} needs a `kind` ({', '.join(KINDS)})")
    kind = raw["kind"]
    if kind not in KINDS:
        raise UserError(f"{path}: stage {index + 1} has kind {kind!r}; use one of {', '.join(KINDS)}")
    extra = set(raw) - {"name", "kind", "config"}
    if extra:
        raise UserError(f"{path}: stage {index + 1} has unknown key {sorted(extra)[0]!r} "
                        "(a stage has name, kind, config)")
    config = raw.get("config") or {}
    if not isinstance(config, dict):
        raise UserError(f"{path}: stage {index + 1}'s config must be a mapping of its command's settings")
    name = str(raw.get("name", f"{index + 1}_{kind}"))
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
        raise UserError(f"{path}: stage name {name!r} must be letters, digits, _ or - (it names a folder)")
    return Stage(name=name, kind=kind, config=config)


def _check_names(path: Path, stages: list[Stage]) -> None:
    seen: set[str] = set()
    for stage in stages:
        if stage.name in seen:
            raise UserError(f"{path}: two stages are called {stage.name!r}; names must be unique")
        for ref in references(stage.config):
            if ref not in seen:
                raise UserError(f"{path}: stage {stage.name!r} refers to @{ref}, which is not an earlier stage")
        seen.add(stage.name)


def references(value: Any) -> list[str]:
    """The stage names referred to ("@name") anywhere inside a config value.

    >>> references({"rewards": [{"params": {"path": "@rm"}}], "data": "x.jsonl"})
    ['rm']
    """
    if isinstance(value, str):
        match = REFERENCE.match(value)
        return [match.group(1)] if match else []
    if isinstance(value, dict):
        return [r for v in value.values() for r in references(v)]
    if isinstance(value, list):
        return [r for v in value for r in references(v)]
    return []


def substitute(value: Any, outputs: dict[str, str]) -> Any:
    """`value` with every "@name" replaced by that stage's output.

    >>> substitute({"a": ["@s1", "b"]}, {"s1": "runs/p/s1"})
    {'a': ['runs/p/s1', 'b']}
    """
    if isinstance(value, str):
        match = REFERENCE.match(value)
        return outputs[match.group(1)] if match else value
    if isinstance(value, dict):
        return {k: substitute(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, outputs) for v in value]
    return value
