"""`rlvr pipeline RECIPE.yaml`: run the stages in order, evaluate after each, compare them at the end.

    DIR/base_eval/            rlvr eval of the starting model
    DIR/<stage>/              the stage's own run directory (+ eval/ for stages that make a model)
    DIR/<stage>/stage.json    written last: the stage is complete (its settings and outputs)
    DIR/pipeline_summary.json, DIR/report.md

A stage with stage.json is skipped on re-run, so a pipeline stopped anywhere continues where it
stopped; one whose recipe settings changed since is refused rather than silently kept, and so is one built
on an earlier stage that ran again with other settings (each mark records the settings of every stage before
it: `upstream`). A stage stopped half-way continues only with the settings it started with.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import yaml

from rlvr import paths
from rlvr.config import load_command_config
from rlvr.errors import UserError
from rlvr.evaluate.store import write_atomic
from rlvr.pipeline.recipe import Recipe, Stage, load_recipe, substitute
from rlvr.pipeline.report import stage_row, write_report
from rlvr.pipeline.stages import CONFIGS, TRAINING, StageOutput, run_stage, settings_digest, stage_config

MODEL_KINDS = ("sft", "grpo")  # the stages whose model the next stages continue from (rm makes a scorer)


def run_pipeline(recipe_path: str | Path, output_dir: str | None = None, progress: bool = True) -> dict[str, Any]:
    recipe = load_recipe(recipe_path)
    root = Path(output_dir or recipe.output_dir or f"runs/pipeline-{recipe.name}")
    _check_stages(recipe, root, recipe_path)
    root.mkdir(parents=True, exist_ok=True)
    base_eval = _evaluate(recipe, recipe.model, root / "base_eval", progress)
    rows = [stage_row("base", "model", recipe.model, None, base_eval)]
    outputs: dict[str, str] = {}
    model, dataset, upstream = recipe.model, None, ""
    for i, stage in enumerate(recipe.stages):
        out = root / stage.name
        config = _configured(recipe, stage, root, outputs, model, dataset)
        later = [str(root / s.name) for s in recipe.stages[i:] if (root / s.name).is_dir()]
        result = _run_or_reuse(stage, config, out, progress, upstream, later)
        upstream = hashlib.sha256(f"{upstream}/{settings_digest(stage.kind, config)}".encode()).hexdigest()[:16]
        if result.summary and "stopped_at" in result.summary:  # Ctrl-C: the stage is unfinished, and so is the pipeline
            print(f"pipeline: stage {stage.name} stopped at step {result.summary['stopped_at']}; "
                  f"run the same command again to continue it")
            return {"recipe": recipe.name, "output_dir": str(root), "stopped_in": stage.name,
                    "stopped_by": result.summary.get("stopped_by"), "stages": rows}
        outputs[stage.name] = result.primary
        if stage.kind in MODEL_KINDS:
            if result.model is None:  # (stage.json edited by hand, or written by another version)
                raise UserError(f"stage {stage.name!r} is marked complete in {out / 'stage.json'} without a model: "
                                "delete that folder to run the stage again")
            model = result.model
        dataset = result.dataset or dataset
        evaluated = _evaluate(recipe, result.model, out / "eval", progress) if stage.kind in MODEL_KINDS else None
        rows.append(stage_row(stage.name, stage.kind, result.primary, result.summary, evaluated))
    summary = {"recipe": recipe.name, "output_dir": str(root), "stages": rows}
    write_report(root, summary)
    return summary


def _configured(recipe: Recipe, stage: Stage, root: Path, outputs: dict[str, str], model: str,
                dataset: str | None) -> dict[str, Any]:
    """The stage's settings (stage_config), with the outputs of the stages before it."""
    try:
        return stage_config(stage.kind, _local_paths(substitute(stage.config, outputs), recipe.base_dir),
                            model=model, dataset=dataset, out=root / stage.name, logging=recipe.logging,
                            group=recipe.name, name=stage.name)
    except ValueError:
        raise UserError(f"stage {stage.name!r} (sft) has no `data` "
                        "and no earlier `sample` stage made a dataset") from None


def _check_stages(recipe: Recipe, root: Path, recipe_path: str | Path) -> None:
    """Every stage's settings checked (keys, types, values) before the first stage runs, each earlier stage's
    output standing in by its folder: a mistake in a late stage costs a second, not the stages before it."""
    outputs = {stage.name: str(root / stage.name) for stage in recipe.stages}
    model, dataset = recipe.model, None
    for stage in recipe.stages:
        if "output_dir" in stage.config:  # (it would be replaced without a word)
            raise UserError(f"{recipe_path}, stage {stage.name!r}: output_dir is the pipeline's to choose "
                            f"({root / stage.name}): drop it, or give the pipeline --output-dir")
        config = _configured(recipe, stage, root, outputs, model, dataset)
        try:
            load_command_config(CONFIGS[stage.kind], values=config)
        except UserError as e:
            raise UserError(f"{recipe_path}, stage {stage.name!r} ({stage.kind}): {e}") from None
        model = outputs[stage.name] if stage.kind in MODEL_KINDS else model
        dataset = str(root / stage.name / "sft.jsonl") if stage.kind == "sample" else dataset


def _run_or_reuse(stage: Stage, config: dict[str, Any], out: Path, progress: bool, upstream: str,
                  later: list[str]) -> StageOutput:
    """The stage's outputs: from its completion mark when it already ran with these settings, on stages
    before it that ran with theirs (`upstream`: their settings, chained; `later`: this stage's folder and
    those after it that exist, which a change before them makes stale)."""
    mark = out / "stage.json"
    digest = settings_digest(stage.kind, config)
    if mark.is_file():
        done = json.loads(mark.read_text(encoding="utf-8"))
        if done["settings"] not in (digest, settings_digest(stage.kind, config, canonical_form=False)):
            raise UserError(f"stage {stage.name!r} already ran with other settings ({out}): "
                            f"delete that folder to run it again with the recipe's new ones")
        if done.get("upstream", upstream) != upstream:  # (marks of older versions lack it: nothing to compare)
            raise UserError(f"stage {stage.name!r} ({out}) was built on earlier stages that have run again "
                            f"with other settings since: delete {' '.join(later)} to run "
                            f"{'it' if len(later) == 1 else 'them'} again on the new ones")
        if progress:
            print(f"pipeline: stage {stage.name} ({stage.kind}) already complete, skipped")
        return StageOutput(**done["outputs"])
    _refuse_other_settings_half_way(stage, digest, out)
    if progress:
        print(f"pipeline: stage {stage.name} ({stage.kind}) → {out}")
    started = time.perf_counter()
    result = run_stage(stage.kind, config, out)
    if result.summary and "stopped_at" in result.summary:
        return result  # not marked complete: a re-run continues it
    record = {"kind": stage.kind, "settings": digest, "upstream": upstream,
              "seconds": round(time.perf_counter() - started, 1),
              "outputs": {"model": result.model, "dataset": result.dataset, "summary": result.summary}}
    write_atomic(mark, json.dumps(record, indent=2, default=str) + "\n")
    return result


def _refuse_other_settings_half_way(stage: Stage, digest: str, out: Path) -> None:
    """A training stage stopped half-way (a checkpoint, no mark) continues from its checkpoint, with the
    settings it started with: a recipe changed since would be recorded as done with settings it never ran."""
    started = out / "stage_config.yaml"
    if stage.kind not in TRAINING or paths.latest_checkpoint(out) is None or not started.is_file():
        return
    before = yaml.safe_load(started.read_text(encoding="utf-8"))
    if isinstance(before, dict) and settings_digest(stage.kind, before) != digest:
        raise UserError(f"stage {stage.name!r} was stopped half-way with other settings ({started}): put the "
                        f"recipe's back to continue it, or delete {out} to run it again with the new ones")


def _evaluate(recipe: Recipe, model: str | None, out: Path, progress: bool) -> dict[str, Any] | None:
    """rlvr eval of `model` with the recipe's evaluation settings (resumable, so re-runs are free)."""
    if recipe.eval is None or model is None:
        return None
    from rlvr.config import EvalConfig, config_from_dict
    from rlvr.evaluate.runner import run_eval

    try:
        config = config_from_dict(EvalConfig, {**recipe.eval, "model": model, "output_dir": str(out)})
    except UserError as e:
        raise UserError(f"the recipe's eval settings: {e} (use the fields of rlvr eval's config)") from None
    return run_eval(config, progress=progress)


def _local_paths(value: Any, base: Path) -> Any:
    """Data files named relative to the recipe's folder (recipes/data/x.jsonl), when not found from here."""
    if (isinstance(value, str) and value.endswith((".jsonl", ".parquet")) and not Path(value).exists()
            and (base / value).exists()):
        return str(base / value)
    if isinstance(value, dict):
        return {k: _local_paths(v, base) for k, v in value.items()}
    if isinstance(value, list):
        return [_local_paths(v, base) for v in value]
    return value
