"""`rlvr.GRPO`: GRPO from Python, with your model, your reward functions and your data in memory.

    from rlvr import GRPO

    def correct(completions, answer, **kwargs):  # TRL's reward signature: a float (or None) per completion
        return [1.0 if answer_ in c[0]["content"] else 0.0 for c, answer_ in zip(completions, answer)]

    rows = [{"prompt": "What is 2 + 3?", "answer": "5"}, ...]  # or a datasets.Dataset, a file, ...
    grpo = GRPO("smollm2", rewards=[correct], train_data=rows, eval_data=heldout, max_steps=20,
                output_dir="runs/mine")
    summary = grpo.train()                        # .train(resume=True) continues from the latest checkpoint
    results = grpo.evaluate(samples=8)            # pass@k on the held-out rows, judged by `correct`
    grpo.save("my-model")                         # a folder that transformers loads

It runs what `rlvr train` runs: the same config (`config=` a TrainConfig, a dict of its keys or a YAML
file; keyword arguments set its top-level keys: `max_steps=20`, `sampling={"group_size": 4}`), the same
run directory, checkpoints, Ctrl-C and resume. What was given in memory is kept in RUN_DIR/inputs/
(rlvr.api.inputs); each function is named in config.yaml where it lives (rlvr.user_code).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr import paths
from rlvr.api.evaluation import evaluate_model, verifier_of
from rlvr.api.inputs import INPUTS, check_model_argument, data_file, is_given_in_memory, keep_sources, model_source
from rlvr.api.running import (
    OnStepEnd,
    as_callbacks,
    config_values,
    run_directory,
    save_from_python,
    train_from_python,
)
from rlvr.config import RewardConfig, TrainConfig, load_config
from rlvr.config.building import config_to_yaml
from rlvr.config.yaml_files import deep_merge
from rlvr.errors import UserError, front_door, python_caller


class GRPO:
    """A GRPO run from Python (see the module docstring for an example).

    Args:
        model: `smollm2`, `tiny`, a hub id, a checkpoint or run folder, or a loaded transformers model (saved
            into the run directory, with `tokenizer`).
        rewards: reward functions (TRL's signature) or names (`math_accuracy`, `file.py:fn`), or mappings
            `{"name": fn, "weight": 0.1}`; None = the data's own. Unless one is marked `correctness: True`,
            the first verifier listed, else the first of yours, is the correctness reward (`accuracy`,
            and the judge of held-out answers when the data has no verifier of its own).
        train_data: a `datasets.Dataset` or `IterableDataset`, a list of dicts, a pandas DataFrame, a `.jsonl`
            / `.parquet` file, a `save_to_disk` folder, a built-in task (`arithmetic`) or `hf:owner/name`.
            Rows have a `prompt` (text or chat messages); every other column reaches the rewards.
        eval_data: held-out rows, in any of the same forms; evaluated before and after training.
        config: a `TrainConfig`, a dict of its keys, or a YAML file; `**settings` set top-level keys on top.
        environment: what the rollouts talk to (or its name): a multi-turn environment class (rlvr.envs), an
            agent function `fn(link, row)` that runs its own loop against the policy's OpenAI-compatible
            endpoint, a loaded verifiers environment, or an OpenEnv Environment class (rlvr.harness).
        callbacks: called after every step as `callback(step, metrics)` (or `.on_step_end(step, metrics)`);
            returning True stops the run there, saved, to be resumed later.
        output_dir: the run directory (default `runs/latest`).
    """

    @front_door
    def __init__(self, model: Any = None, rewards: Sequence[Any] | None = None, train_data: Any = None,
                 eval_data: Any = None, *, config: TrainConfig | dict[str, Any] | str | Path | None = None,
                 tokenizer: Any = None, environment: Any = None, callbacks: Sequence[Any] = (),
                 output_dir: str | Path | None = None, **settings: Any) -> None:
        check_model_argument(model)
        self._given = {"model": model, "tokenizer": tokenizer, "train": train_data, "eval": eval_data}
        self._callbacks = as_callbacks(callbacks)
        values = deep_merge(config_values(config, TrainConfig, load_config), settings)
        run_dir = run_directory(output_dir, values.get("output_dir") or TrainConfig.output_dir)
        inputs = run_dir / INPUTS
        named: dict[str, Any] = {"output_dir": str(run_dir), "data": {}}
        if model is not None:
            named["model"] = {"name": str(inputs / "model") if not isinstance(model, (str, Path)) else str(model)}
        for key, given in (("train", train_data), ("eval", eval_data)):
            if given is not None:
                named["data"][key] = str(inputs / f"{key}.jsonl") if is_given_in_memory(given) else str(given)
        if rewards is not None:  # (one reward may be given alone, as TRL's reward_funcs may)
            named["rewards"] = [rewards] if isinstance(rewards, (str, dict)) or callable(rewards) else list(rewards)
        if environment is not None:
            named["environment"] = environment if isinstance(environment, dict) else {"name": environment}
        with python_caller():
            self.config: TrainConfig = load_config(values=deep_merge(values, named))
        self.run_dir = run_dir
        self.summary: dict[str, Any] | None = None

    @front_door
    def train(self, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
        """Train as configured and return the run's summary (as in summary.json); `resume=True` continues the
        run in output_dir from its latest checkpoint, with the same model, rewards and data given again;
        `overwrite=True` starts afresh over the run output_dir holds, deleting it (else that is refused)."""
        self.summary = train_from_python(
            self.run_dir, lambda step_end: self._launch(resume, step_end, overwrite), self._write_inputs,
            self._callbacks, resume=resume, overwrite=overwrite)
        return self.summary

    def _launch(self, resume: bool, on_step_end: OnStepEnd, overwrite: bool) -> dict[str, Any]:
        from rlvr.grpo.trainer import train_grpo

        return train_grpo(self.config, resume=resume, on_step_end=on_step_end, overwrite=overwrite)

    @front_door
    def evaluate(self, data: Any = None, *, reward: Any = None, correct_at: float | None = None, samples: int = 8,
                 model: str = "latest", output_dir: str | Path | None = None, **settings: Any) -> dict[str, Any]:
        """pass@1, pass@k and maj@k of the run's model (`latest`, `best` with keep_best, `base`, or a folder) on
        `data` (default: the run's held-out rows), asked as training asked (template, examples); answers
        judged by the data's verifier, else by `reward`, else by the run's correctness reward. Results go to
        output_dir (default RUN_DIR/eval/<data>); `**settings` are rlvr eval's (temperature=0.6, k=[1, 4], ...)."""
        from rlvr.rl.build import heldout_source, with_environment_data
        from rlvr.rl.heldout import no_eval_rows

        c = self.config
        if model == "latest":
            self._trained_yet()
        if data is None:
            data = heldout_source(with_environment_data(c).data)
            if data is None:
                raise UserError(f"evaluate() has no held-out rows: {no_eval_rows(c)}, or pass data= to evaluate()")
        name = (Path(data).stem if isinstance(data, (str, Path)) else "eval") or "eval"
        if reward is None and verifier_of(data) is None:
            reward = self._correctness_reward()
        asked: dict[str, Any] = {"template": c.data.template, "system_prompt": c.data.system_prompt,
                                 "difficulty": c.data.difficulty}
        if c.data.few_shot is not None:
            asked["examples"] = [dataclasses.asdict(turn) for turn in c.data.few_shot]
        defaults = {"data": asked, "generation": {"max_new_tokens": c.eval_max_new_tokens or
                                                  c.generation.max_new_tokens},
                    "model": {"device": c.model.device, "dtype": c.model.dtype, "cache_dir": c.model.cache_dir},
                    "seed": c.seed, "threads": c.threads}
        chosen = {"latest": str(self.run_dir), "best": str(self.run_dir / "best"), "base": c.model.name}
        return evaluate_model(chosen.get(model, model), data, reward=reward, correct_at=correct_at, samples=samples,
                              output_dir=output_dir or self.run_dir / "eval" / name,
                              config=deep_merge(defaults, settings))

    @front_door
    def save(self, path: str | Path, merge: bool = False) -> Path:
        """Write the run's latest model as a folder transformers (and peft, and vLLM) load without rlvr; with
        LoRA, the adapters, or with `merge` one plain checkpoint with them folded in."""
        self._trained_yet()
        return save_from_python(self.run_dir, path, merge, self.config.model.cache_dir)

    def _trained_yet(self) -> None:
        if paths.latest_checkpoint(self.run_dir) is None:
            raise UserError(f"nothing trained yet: {self.run_dir} holds no checkpoint (call train() first)")

    def _write_inputs(self, resume: bool) -> None:
        """What was given in memory, written where the config says (rlvr.api.inputs)."""
        c, folder = self.config, self.run_dir / INPUTS
        data_file(self._given["train"], folder, "train", c.data.train_size, resume)
        data_file(self._given["eval"], folder, "eval", c.data.eval_size + c.data.validation_size, resume)
        if self._given["model"] is not None:
            model_source(self._given["model"], self._given["tokenizer"], folder, resume)
        tools = c.environment.params.get("tools") if c.environment.name == "tools" else None
        named = [s for s in (c.environment.name, c.algorithm.policy_loss, c.algorithm.advantage_fn) if s]
        named += [t for t in tools if isinstance(t, str)] if isinstance(tools, list) else []  # (TRL's tools=)
        keep_sources([r.name for r in c.rewards or []] + named, folder)

    def _correctness_reward(self) -> dict[str, Any]:
        """The run's correctness reward as it ran (its config.yaml records which), else as it will run."""
        written = self.run_dir / paths.CONFIG
        rewards = load_config(written).rewards if written.is_file() else self.config.rewards
        marked = [r for r in rewards or [] if r.correctness]
        if not marked:
            raise UserError("the data has no verifier of its own (no `answer` or tests column) and the run has no "
                            "correctness reward: pass reward= to judge the answers")
        return _plain_reward(marked[0])

    def __repr__(self) -> str:
        return f"GRPO(output_dir={str(self.run_dir)!r})\n{config_to_yaml(self.config)}"


def _plain_reward(reward: RewardConfig) -> dict[str, Any]:
    return {"name": reward.name, "params": reward.params, "correct_at": reward.correct_at,
            "timeout_s": reward.timeout_s}


class PPO(GRPO):
    """A PPO run from Python: GRPO's arguments and conventions, with a learned critic and GAE for the advantages
    (config `ppo:` sets the critic, λ and γ; rlvr.ppo). What `rlvr.ppo.trainer.train_ppo` runs."""

    def _launch(self, resume: bool, on_step_end: OnStepEnd, overwrite: bool) -> dict[str, Any]:
        from rlvr.ppo.trainer import train_ppo

        return train_ppo(self.config, resume=resume, on_step_end=on_step_end, overwrite=overwrite)

    def __repr__(self) -> str:
        return super().__repr__().replace("GRPO(", "PPO(", 1)
