"""`rlvr.SFT` and `rlvr.RewardModel`: supervised fine-tuning and reward-model training from Python, with the
conventions of `rlvr.GRPO` (a loaded model or a name, rows in memory or a `datasets` object, callbacks, resume,
overwrite, the same run directory), so DeepSeek-R1's recipe reads as one script:

    from rlvr import GRPO, SFT

    sft = SFT("smollm2", train_data=cold_start_rows, max_steps=50, output_dir="runs/cold-start")
    sft.train()                                               # .train(resume=True), .train(overwrite=True)
    GRPO("runs/cold-start", rewards=["math_accuracy"], train_data="gsm8k", output_dir="runs/rl").train()

They run what `rlvr sft` and `rlvr rm` run: `config=` an SFTConfig / RewardModelConfig, a dict of its keys or a
YAML file; keyword arguments set its top-level keys (`batch_size=8`, `optim={"lr": 1e-5}`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from rlvr.api.inputs import INPUTS, check_model_argument, data_file, is_given_in_memory, model_source
from rlvr.api.running import OnStepEnd, as_callbacks, config_values, run_directory, save_from_python, train_from_python
from rlvr.config import RewardModelConfig, SFTConfig, load_command_config
from rlvr.config.building import config_to_yaml
from rlvr.config.yaml_files import deep_merge
from rlvr.errors import front_door, python_caller

ROWS_KEPT = 10_000_000  # (of an IterableDataset: a stream is taken up to this many rows)


class _Supervised:
    """A run on one data file of rows (split into train and held-out by the config's eval_fraction)."""

    config_class: ClassVar[type[Any]]
    label: ClassVar[str]

    @front_door
    def __init__(self, model: Any = None, train_data: Any = None, *, config: Any = None, tokenizer: Any = None,
                 callbacks: Sequence[Any] = (), output_dir: str | Path | None = None, **settings: Any) -> None:
        check_model_argument(model)
        self._given = {"model": model, "tokenizer": tokenizer, "train": train_data}
        self._callbacks = as_callbacks(callbacks)
        cls = self.config_class
        values = deep_merge(config_values(config, cls, lambda path: load_command_config(cls, path)), settings)
        run_dir = run_directory(output_dir, values.get("output_dir") or cls.output_dir)
        named: dict[str, Any] = {"output_dir": str(run_dir)}
        if model is not None:
            named["model"] = {"name": str(run_dir / INPUTS / "model") if not isinstance(model, (str, Path))
                              else str(model)}
        if train_data is not None:
            named["data"] = (str(run_dir / INPUTS / "train.jsonl") if is_given_in_memory(train_data)
                             else str(train_data))
        with python_caller():
            self.config: Any = load_command_config(cls, values=deep_merge(values, named))
        self.run_dir = run_dir
        self.summary: dict[str, Any] | None = None

    @front_door
    def train(self, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
        """Train as configured and return the run's summary (summary.json); `resume=True` continues the run in
        output_dir from its latest checkpoint (the same data given again); `overwrite=True` starts afresh over
        the run output_dir holds, deleting it (else that is refused)."""
        self.summary = train_from_python(self.run_dir, lambda step_end: self._launch(resume, step_end, overwrite),
                                         self._write_inputs, self._callbacks, resume=resume, overwrite=overwrite)
        return self.summary

    @front_door
    def save(self, path: str | Path, merge: bool = False) -> Path:
        """Write the run's latest model as a folder transformers (and peft) load without rlvr."""
        return save_from_python(self.run_dir, path, merge, self.config.model.cache_dir)

    def _launch(self, resume: bool, on_step_end: OnStepEnd, overwrite: bool) -> dict[str, Any]:
        raise NotImplementedError

    def _write_inputs(self, resume: bool) -> None:
        folder = self.run_dir / INPUTS
        data_file(self._given["train"], folder, "train", ROWS_KEPT, resume)
        if self._given["model"] is not None:
            model_source(self._given["model"], self._given["tokenizer"], folder, resume)

    def __repr__(self) -> str:
        return f"{self.label}(output_dir={str(self.run_dir)!r})\n{config_to_yaml(self.config)}"


class SFT(_Supervised):
    """Supervised fine-tuning from Python (`rlvr sft`): rows of `prompt` and `completion`, or of chat `messages`
    (the last assistant turn is learned); a cold start before GRPO, or distillation from a teacher's samples."""

    config_class, label = SFTConfig, "SFT"

    def _launch(self, resume: bool, on_step_end: OnStepEnd, overwrite: bool) -> dict[str, Any]:
        from rlvr.sft.train import train_sft

        return train_sft(self.config, resume=resume, on_step_end=on_step_end, overwrite=overwrite)


class RewardModel(_Supervised):
    """A reward model trained from Python (`rlvr rm`): rows of `prompt`, `chosen` and `rejected`; named in a GRPO
    or PPO run as the reward `{"name": "reward_model", "params": {"path": RUN_DIR}}`."""

    config_class, label = RewardModelConfig, "RewardModel"

    def _launch(self, resume: bool, on_step_end: OnStepEnd, overwrite: bool) -> dict[str, Any]:
        from rlvr.reward_models.train import train_reward_model

        return train_reward_model(self.config, resume=resume, on_step_end=on_step_end, overwrite=overwrite)

