"""Running one stage of a recipe: its command's config, resumed when it was interrupted.

Every stage writes into its own folder and reports what it made (`StageOutput`). A stage whose
folder holds checkpoints but no completion mark was interrupted: `sft`, `grpo` and `rm` continue
from their latest checkpoint (the run core's resume), `sample` skips the prompts already sampled.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlvr import paths
from rlvr.config import RewardModelConfig, SampleConfig, SFTConfig, TrainConfig, load_command_config, load_config
from rlvr.config.loading import canonical
from rlvr.intact import newest_intact
from rlvr.run.checkpoint import load_state
from rlvr.run.directory import resume_config


@dataclass(frozen=True)
class StageOutput:
    model: str | None = None  # a model directory later stages and `rlvr eval` load
    dataset: str | None = None  # an SFT dataset (sample stages)
    summary: dict[str, Any] | None = None  # the stage command's own summary

    @property
    def primary(self) -> str:
        """What "@stage" stands for: the model, or the dataset of a sample stage."""
        return self.model or self.dataset or ""


TRAINING = ("sft", "grpo", "rm")  # the stages that log to trackers


def stage_config(kind: str, config: dict[str, Any], *, model: str, dataset: str | None, out: Path,
                 logging: dict[str, Any] | None = None, group: str = "", name: str = "") -> dict[str, Any]:
    """The stage's full settings: its own, then what the pipeline fills in (model, data, output folder, and
    for training stages the trackers: the recipe's `logging`, one tracker run per stage named after it, the
    stages grouped under the recipe's name)."""
    c = dict(config)
    if kind in TRAINING:
        own = c.get("logging") or {}
        own = {"report_to": [own]} if isinstance(own, str) else own
        c["logging"] = {"group": group or None, "run_name": name or None, **(logging or {}), **own}
    own = c.get("model")  # the stage's own model setting: a name, a section, or nothing
    if isinstance(own, dict) or (own is None and kind == "grpo"):  # grpo as a section: the form earlier
        c["model"] = {"name": model, **(own or {})}                # pipelines recorded (stage.json digests)
    elif own is None:
        c["model"] = model
    if kind == "sft" and "data" not in c:
        if dataset is None:
            raise ValueError("no data")
        c["data"] = dataset
    c["output_dir"] = str(out)
    return c


def run_stage(kind: str, config: dict[str, Any], out: Path) -> StageOutput:
    """Run (or continue) the stage of `kind` with `config` in folder `out`."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "stage_config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return {"sft": _sft, "grpo": _grpo, "sample": _sample, "rm": _rm}[kind](path, out)


def _sft(path: Path, out: Path) -> StageOutput:
    from rlvr.sft.train import train_sft

    summary = train_sft(load_command_config(SFTConfig, path), resume=paths.latest_checkpoint(out) is not None)
    return StageOutput(model=str(out), summary=summary)


def _grpo(path: Path, out: Path) -> StageOutput:
    from rlvr.grpo.trainer import train_grpo

    resume = paths.latest_checkpoint(out) is not None  # an interrupted stage goes on with its checkpoint's config
    config = resume_config(TrainConfig, out) if resume else load_config(path)
    return StageOutput(model=str(out), summary=train_grpo(config, resume=resume))


def _sample(path: Path, out: Path) -> StageOutput:
    from rlvr.sample.runner import run_sample

    summary = run_sample(load_command_config(SampleConfig, path))
    return StageOutput(dataset=str(summary["output"]), summary=summary)


def _rm(path: Path, out: Path) -> StageOutput:
    from rlvr.reward_models.train import train_reward_model

    latest, _ = newest_intact(out)  # (broken newer ones are the resume's to set aside, with one line each)
    if latest is not None and "optimizer" not in load_state(latest):
        shutil.rmtree(paths.checkpoint_dir(out))  # checkpointed before reward models could resume: start again
    summary = train_reward_model(load_command_config(RewardModelConfig, path),
                                 resume=paths.latest_checkpoint(out) is not None)
    return StageOutput(model=str(out), summary=summary)


CONFIGS: dict[str, type] = {"sft": SFTConfig, "grpo": TrainConfig, "sample": SampleConfig, "rm": RewardModelConfig}


def settings_digest(kind: str, config: dict[str, Any], canonical_form: bool = True) -> str:
    """A short hash of a stage's settings, in canonical form (keys of earlier versions moved to their
    place, so a recipe rewritten with the current keys still matches) or as written. Where the numbers are
    logged (`logging`) is no setting of the result: changing it re-runs nothing."""
    config = {key: value for key, value in config.items() if key != "logging"}
    settings = canonical(CONFIGS[kind], config) if canonical_form else config
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
