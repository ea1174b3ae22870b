"""`rlvr.trl.GRPOConfig` and `rlvr.trl.GRPOTrainer`: TRL's call shape over rlvr's GRPO (rlvr.api.GRPO).

A TRL script ports by changing its import line:

    from rlvr.trl import GRPOConfig, GRPOTrainer      # was: from trl import GRPOConfig, GRPOTrainer

    training_args = GRPOConfig(output_dir="Qwen2-0.5B-GRPO", learning_rate=1e-5, num_generations=8)
    trainer = GRPOTrainer(model="Qwen/Qwen2-0.5B-Instruct", reward_funcs=[accuracy, format_reward],
                          args=training_args, train_dataset=dataset, peft_config=LoraConfig(r=16))
    trainer.train()
    trainer.save_model(training_args.output_dir)

TRL's defaults apply to what changes the learning, and every argument rlvr does not support is refused in
one line unless it keeps TRL's default (rlvr.trl.arguments); docs/from_trl.md has the table. The run
directory is `output_dir`, as rlvr's: config.yaml, metrics.jsonl, checkpoints/, summary.json.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers.trainer_callback import TrainerState
from transformers.trainer_utils import TrainOutput

from rlvr import paths
from rlvr.api import GRPO
from rlvr.errors import UserError, a_kind, first_line, front_door
from rlvr.rewards.registry import BUILTIN_REWARDS
from rlvr.trl.arguments import translate
from rlvr.trl.gone import GONE
from rlvr.trl.recorded import DEFAULTS


class GRPOConfig:
    """TRL's GRPOConfig arguments, by TRL's names and defaults (read back as attributes, as TRL's are)."""

    reward_weights: list[float] | None  # (set in __init__ with every other argument; read by GRPOTrainer)

    @front_door
    def __init__(self, **kwargs: Any) -> None:
        unknown = [k for k in kwargs if k not in DEFAULTS and k not in GONE]
        if unknown:
            translate({unknown[0]: kwargs[unknown[0]]}, 0)  # one line naming it, with the nearest TRL name
        # (the others are checked when the trainer is built, knowing the data's size)
        self._given = set(kwargs)
        for name, default in DEFAULTS.items():
            setattr(self, name, kwargs.get(name, default))
        for name in set(kwargs) & set(GONE):  # (older TRL's and transformers 4's: rlvr.trl.gone)
            setattr(self, name, kwargs[name])

    def given(self) -> dict[str, Any]:
        """The arguments given, or changed since, with their values."""
        known = {name: getattr(self, name) for name in DEFAULTS
                 if name in self._given or getattr(self, name) != DEFAULTS[name]}
        return known | {name: getattr(self, name) for name in sorted(self._given & set(GONE))}

    def __repr__(self) -> str:
        return f"GRPOConfig({', '.join(f'{k}={v!r}' for k, v in self.given().items())})"


class GRPOTrainer:
    """TRL's GRPOTrainer call shape: `GRPOTrainer(model, reward_funcs, args, train_dataset, eval_dataset,
    processing_class, peft_config, callbacks)`, `.train()`, `.save_model()`, `.evaluate()`, and after training
    `.model`, `.processing_class` and `.state` as TRL's trainer has them."""

    @front_door
    def __init__(self, model: Any, reward_funcs: Any = None, args: GRPOConfig | None = None, train_dataset: Any = None,
                 eval_dataset: Any = None, processing_class: Any = None, reward_processing_classes: Any = None,
                 callbacks: Sequence[Callable[..., Any]] | None = None, optimizers: tuple[Any, Any] = (None, None),
                 quantization_config: Any = None, peft_config: Any = None, tools: Any = None,
                 rollout_func: Any = None, environment_factory: Any = None) -> None:
        _refuse_given(reward_processing_classes=reward_processing_classes, quantization_config=quantization_config,
                      rollout_func=rollout_func, environment_factory=environment_factory,
                      optimizers=None if tuple(optimizers) == (None, None) else optimizers)
        if train_dataset is None:
            raise UserError("GRPOTrainer needs a train_dataset (a datasets.Dataset with a `prompt` column)")
        if isinstance(eval_dataset, dict):
            raise UserError("eval_dataset is a dict of datasets: rlvr evaluates one held-out set; give one of them")
        self.args = args if args is not None else GRPOConfig()
        rows = len(train_dataset) if hasattr(train_dataset, "__len__") else None
        given = self.args.given()
        iterations = given.pop("max_tool_calling_iterations", None)  # (read with `tools`)
        translation = translate(given, rows)
        settings = _nested(translation.settings)
        if tools is not None:
            settings["environment"] = _tools(tools, iterations)
        elif iterations is not None:
            translation.notes.append(f"max_tool_calling_iterations={iterations!r}: no effect without tools "
                                     "(nor in TRL)")
        # TRL renders a text prompt as it is (its "standard" form, completions as text) and a conversation with
        # the chat template (completions as messages): so does rlvr here; with tools, whose calls are chat turns,
        # a text prompt is the user's message
        first = next(iter(train_dataset), None)
        text = isinstance(first, dict) and isinstance(first.get("prompt"), str)
        settings.setdefault("data", {})["template"] = "plain" if text and tools is None else "chat"
        if rows is not None:  # every row, as TRL trains on (and counts its epochs by), not data.train_size's 2,000
            settings["data"]["train_size"] = rows
        if eval_dataset is not None and hasattr(eval_dataset, "__len__"):  # (TRL evaluates every held-out row)
            settings["data"]["eval_size"] = len(eval_dataset)
        if peft_config is not None:
            settings.setdefault("model", {})["lora"] = _lora(peft_config)
        for note in translation.notes:
            print(f"rlvr.trl: {note}", file=sys.stderr)
        if processing_class is not None and isinstance(model, str):
            from rlvr.models import load_model

            model = load_model(model)[0]  # (with the tokenizer given: saved together into the run)
        self._grpo = GRPO(model, rewards=_rewards(reward_funcs, self.args.reward_weights), train_data=train_dataset,
                          eval_data=eval_dataset, tokenizer=processing_class, callbacks=callbacks or (),
                          config=settings)
        self.config = self._grpo.config  # the rlvr config the run uses (config.yaml)
        self.summary: dict[str, Any] | None = None  # rlvr's summary of the last train() (summary.json)
        self._given = (model, processing_class)
        self._trained = False  # (train() was called: a second one without resume_from_checkpoint is refused)
        self._loaded: tuple[Any, Any] | None = None  # (model, tokenizer) read by .model and .processing_class

    @front_door
    def train(self, resume_from_checkpoint: bool | str | None = None) -> TrainOutput:
        """Train; `resume_from_checkpoint=True` (or a checkpoint of this output_dir) continues from the latest
        intact checkpoint. Without it, an output_dir holding an earlier run (the script run again) is started
        afresh over, as TRL does, said in one line. Returns TRL's `TrainOutput`: global_step in optimizer steps
        (TRL's count), training_loss the mean of the steps' losses; rlvr's summary (summary.json) is `.summary`."""
        run_dir = self._grpo.run_dir
        if isinstance(resume_from_checkpoint, str):
            if not Path(resume_from_checkpoint).resolve().is_relative_to(run_dir.resolve()):
                raise UserError(f"resume_from_checkpoint={resume_from_checkpoint!r} is not a checkpoint of "
                                f"output_dir {run_dir}: rlvr resumes a run in its own directory (True)")
        resume = bool(resume_from_checkpoint)
        if self._trained and not resume:
            raise UserError(f"this GRPOTrainer has trained already, into {run_dir}: a second train() would start over "
                            "that run (TRL's goes on from the trained weights with a new optimizer); "
                            "train(resume_from_checkpoint=True) continues it, or give save_model()'s folder as "
                            "model= to a new GRPOTrainer")
        self._loaded = None
        overwrite = not resume and paths.latest_checkpoint(run_dir) is not None
        if overwrite:
            print(f"rlvr.trl: {run_dir} holds an earlier run: starting afresh over it, as TRL does "
                  "(resume_from_checkpoint=True would continue it)", file=sys.stderr)
        try:
            self.summary = self._grpo.train(resume=resume, overwrite=overwrite)
        finally:  # (a run that failed before its first checkpoint may be started again)
            self._trained = self._trained or paths.latest_checkpoint(run_dir) is not None
        given = self._given[0]
        if not isinstance(given, (str, os.PathLike)) and self._trained:
            self._give_back(given)
        return train_output(self.summary, run_dir, self.config.algorithm.updates_per_batch)

    def _give_back(self, given: Any) -> None:
        """The trained weights into the model object given, as TRL trains it in place; where they do not fit it
        (another class's keys), `.model` is the trained model loaded from the run, said in one line."""
        trained, tokenizer = self._model_and_tokenizer()
        try:
            given.load_state_dict(trained.state_dict())
        except (RuntimeError, ValueError) as e:
            print(f"rlvr.trl: the trained weights do not fit the model object given ({first_line(e)}): "
                  "trainer.model is the trained model, loaded from the run", file=sys.stderr)
            return
        self._loaded = (given, tokenizer)

    @property
    def model(self) -> Any:
        """The model: once trained, the run's latest (LoRA adapters merged in; a model object given to the
        trainer holds the trained weights too, as in TRL); before, the model given."""
        return self._model_and_tokenizer()[0]

    @property
    def processing_class(self) -> Any:
        """The tokenizer: the one given, else the one loaded with the model (once trained, the run's; None for a
        model object given without one, before training)."""
        return self._model_and_tokenizer()[1]

    @property
    def state(self) -> TrainerState:
        """TRL's (transformers') TrainerState after train(): global_step in optimizer steps (TRL's count),
        max_steps, and log_history, one dict of metrics a step (the run's metrics.jsonl)."""
        if not self._trained:
            raise UserError("the trainer has no state before train(): call train() first")
        rows = _metrics_rows(self._grpo.run_dir)
        per_batch = self.config.algorithm.updates_per_batch
        done = int(rows[-1]["step"]) if rows else 0
        return TrainerState(global_step=done * per_batch, max_steps=self.config.max_steps * per_batch,
                            log_history=[{**row, "step": row["step"] * per_batch} for row in rows])

    def _model_and_tokenizer(self) -> tuple[Any, Any]:
        if self._loaded is None:
            from rlvr.models import load_model

            model, tokenizer = self._given  # (trained: the run holds a checkpoint, train() saw to it)
            source = self._grpo.run_dir if self._trained else model if isinstance(model, (str, os.PathLike)) else None
            if source is not None:
                model, loaded = load_model(str(source), self.config.model.cache_dir)
                tokenizer = tokenizer if tokenizer is not None else loaded
            self._loaded = (model, tokenizer)
        return self._loaded

    @front_door
    def save_model(self, output_dir: str | None = None) -> Path:
        """The trained model as a folder transformers (and peft) load: `output_dir`, or output_dir/model when it
        is the run directory itself (None, or args.output_dir), which holds the run's checkpoints. As in TRL, a
        folder that exists is written into: the model's files replace those of the same name."""
        target = Path(output_dir) if output_dir else self._grpo.run_dir
        if target.resolve() == self._grpo.run_dir.resolve():
            target = target / "model"
        if not (target.is_dir() and any(target.iterdir())):
            return self._grpo.save(target)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            for item in self._grpo.save(staging / "model").iterdir():
                old = target / item.name
                if old.is_dir() and not old.is_symlink():
                    shutil.rmtree(old)
                os.replace(item, old)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target

    @front_door
    def evaluate(self, **kwargs: Any) -> dict[str, Any]:
        """rlvr's evaluation of the trained model on the eval_dataset (pass@k, maj@k): rlvr.GRPO.evaluate."""
        return self._grpo.evaluate(**kwargs)


def train_output(summary: dict[str, Any], run_dir: Path, updates_per_batch: int) -> TrainOutput:
    """TRL's (transformers') TrainOutput of a run: its optimizer steps, the mean of its steps' losses
    (metrics.jsonl), and TRL's train_* metrics."""
    steps = int(summary.get("stopped_at", summary.get("steps", 0))) * updates_per_batch
    rows = _metrics_rows(run_dir)
    losses = [row["loss"] for row in rows if row.get("loss") is not None]  # (a NaN loss is written as null)
    loss = sum(losses) / len(losses) if losses else 0.0
    runtime = float(summary.get("train_seconds", 0.0))
    metrics = {"train_runtime": runtime, "train_loss": loss,
               "train_steps_per_second": steps / runtime if runtime else 0.0}
    return TrainOutput(global_step=steps, training_loss=loss, metrics=metrics)


def _metrics_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The run's metrics a step (metrics.jsonl), in step order."""
    metrics_file = run_dir / paths.METRICS
    rows = [json.loads(line) for line in metrics_file.read_text().splitlines()] if metrics_file.is_file() else []
    return [row for row in rows if "step" in row]


def _refuse_given(**arguments: Any) -> None:
    for name, value in arguments.items():
        if value is not None:
            raise UserError(f"GRPOTrainer argument {name} is not supported by rlvr.trl: drop it "
                            "(docs/from_trl.md lists what rlvr has instead)")


def _tools(tools: Any, iterations: Any) -> dict[str, Any]:
    """TRL's `tools` (functions the model may call) as rlvr's function-tools environment (rlvr.envs.function_tools);
    `max_tool_calling_iterations` k as k + 1 model messages at most (None: rlvr's environment.max_turns)."""
    if not isinstance(tools, (list, tuple)) or not tools:
        raise UserError(f"GRPOTrainer argument tools={tools!r}: give a list of functions the model may call")
    if iterations is not None and (not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 0):
        raise UserError(f"GRPOConfig argument max_tool_calling_iterations={iterations!r}: give a whole number >= 0, "
                        "or None")
    return {"name": "tools", "params": {"tools": list(tools)},
            **({"max_turns": iterations + 1} if iterations is not None else {})}


def _rewards(reward_funcs: Any, weights: list[float] | None) -> list[dict[str, Any]]:
    """TRL's reward_funcs (one or a list) with reward_weights, as rlvr's rewards."""
    funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    if weights is not None and not (isinstance(weights, (list, tuple)) and all(
            isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights)):
        raise UserError(f"GRPOConfig argument reward_weights={weights!r} is not a list of numbers (one per reward)")
    if reward_funcs is None or not funcs:
        raise UserError("GRPOTrainer needs reward_funcs: a function (completions, **columns) -> list of floats, "
                        "or a list of them")
    if weights is not None and len(weights) != len(funcs):
        raise UserError(f"reward_weights has {len(weights)} weights for {len(funcs)} reward_funcs: give one each")
    for f in funcs:
        if isinstance(f, torch.nn.Module):
            raise UserError(f"reward_funcs holds a model ({type(f).__name__}): rlvr.trl takes reward functions; a "
                            "reward model is trained by `rlvr rm` and named as {'name': 'reward_model', 'params': "
                            "{'path': ...}} in rlvr's config (docs/from_trl.md)")
        if isinstance(f, str) and f not in BUILTIN_REWARDS and ":" not in f:
            raise UserError(f"reward_funcs {f!r}: TRL loads a name as a reward model; rlvr's reward models are "
                            "trained by `rlvr rm` and named as {'name': 'reward_model', 'params': {'path': ...}} "
                            "in a config (or give a function)")
    return [{"name": f, "weight": 1.0 if weights is None else float(w)}
            for f, w in zip(funcs, weights or [1.0] * len(funcs))]


def _lora(peft_config: Any) -> dict[str, Any]:
    """peft's LoraConfig as model.lora: r, lora_alpha, lora_dropout, target_modules; any other field changed from
    peft's default is refused."""
    from peft import LoraConfig

    if not isinstance(peft_config, LoraConfig):
        raise UserError(f"peft_config is {a_kind(peft_config)}: rlvr trains LoRA adapters (LoraConfig)")
    default = LoraConfig()
    mapped = ("r", "lora_alpha", "lora_dropout", "target_modules", "task_type")
    for f in dataclasses.fields(LoraConfig):
        if f.name not in mapped and getattr(peft_config, f.name, None) != getattr(default, f.name, None):
            raise UserError(f"peft_config {f.name}={getattr(peft_config, f.name)!r} is not supported by rlvr.trl: "
                            "rlvr's LoRA takes r, lora_alpha, lora_dropout and target_modules")
    targets = peft_config.target_modules
    targets = ["all-linear"] if targets is None else [targets] if isinstance(targets, str) else sorted(targets)
    return {"rank": peft_config.r, "alpha": float(peft_config.lora_alpha), "dropout": peft_config.lora_dropout,
            "target_modules": targets}


def _nested(settings: dict[str, Any]) -> dict[str, Any]:
    """{"optim.lr": 1e-6} -> {"optim": {"lr": 1e-6}}."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        *sections, last = key.split(".")
        target = out
        for section in sections:
            target = target.setdefault(section, {})
        target[last] = value
    return out
