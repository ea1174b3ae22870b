"""rlvr.trl.arguments: every argument of TRL's GRPOConfig is mapped to rlvr's setting, noted as changing nothing
rlvr learns, or refused in one line naming it; never silently dropped."""

import dataclasses
import math

import pytest

from rlvr.config import load_config
from rlvr.errors import UserError
from rlvr.trl.arguments import TRAINER_ARGUMENTS, translate
from rlvr.trl.recorded import DEFAULTS, TRL_VERSION
from rlvr.trl.trainer import _nested

ROWS = 16


def other_value(default):
    """A value of the default's kind that is not the default."""
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 3
    if isinstance(default, float):
        return default / 2 if default else 0.5
    if isinstance(default, str):
        return "something-else"
    if isinstance(default, list):
        return ["something-else"]
    if isinstance(default, dict):
        return {"key": 1}
    return 7  # (None: any set value)


@pytest.mark.parametrize("name", sorted(set(DEFAULTS) - set(TRAINER_ARGUMENTS)))
def test_every_argument_changes_a_setting_is_noted_or_is_refused_in_one_line(name):
    value = other_value(DEFAULTS[name])
    baseline = translate({}, ROWS)
    try:
        changed = translate({name: value}, ROWS)
    except UserError as e:
        assert "\n" not in str(e) and name in str(e), str(e)
        return
    said = changed.notes != baseline.notes
    moved = changed.settings != baseline.settings
    assert said or moved, f"{name}={value!r} was taken and dropped: no setting changed and nothing was said"


def test_the_recorded_fields_are_trls_own_when_trl_is_installed():
    trl = pytest.importorskip("trl")
    from trl import GRPOConfig

    if trl.__version__ != TRL_VERSION:
        pytest.skip(f"recorded from TRL {TRL_VERSION}, installed {trl.__version__}: scripts/record_trl_fields.py")
    fields = {f.name for f in dataclasses.fields(GRPOConfig) if f.init and not f.name.startswith("_")}
    assert fields == set(DEFAULTS)


def settings(**given):
    return load_config(values=_nested(translate(given, ROWS).settings))


def test_trls_defaults_apply_to_what_changes_the_learning():
    c = settings()
    assert (c.optim.lr, c.algorithm.beta, c.algorithm.loss_aggregation) == (1e-6, 0.0, "token_mean")
    assert (c.generation.temperature, c.generation.max_new_tokens, c.seed) == (1.0, 512, 42)
    assert (c.algorithm.std_estimator, c.optim.schedule) == ("unbiased", "linear")
    assert c.optim.betas == (0.9, 0.999) and c.sampling.batch_size == 8 and c.sampling.group_size == 8
    assert c.max_steps == math.ceil(3 * ROWS * 8 / 8)  # three epochs of every prompt sampled 8 times, 8 a step
    assert c.model.gradient_checkpointing is False  # rlvr's: it changes memory, not the numbers
    assert settings(gradient_checkpointing=True).model.gradient_checkpointing is True


@pytest.mark.parametrize("given, key, expected", [
    ({"learning_rate": 3e-6}, "optim.lr", 3e-6),
    ({"loss_type": "grpo"}, "algorithm.loss_aggregation", "sequence_mean"),
    ({"loss_type": "dr_grpo"}, "algorithm.loss_aggregation", "constant"),
    ({"loss_type": "cispo"}, "algorithm.policy_loss", "cispo"),
    ({"importance_sampling_level": "sequence"}, "algorithm.policy_loss", "gspo"),
    ({"scale_rewards": False}, "algorithm.advantage_scale", "none"),
    ({"scale_rewards": "batch"}, "algorithm.advantage_scale", "batch_std"),
    ({"epsilon": 0.1}, "algorithm.clip_high", 0.1),
    ({"epsilon": 0.1, "epsilon_high": 0.28}, "algorithm.clip_high", 0.28),
    ({"per_device_train_batch_size": 4, "gradient_accumulation_steps": 4}, "sampling.batch_size", 16),
    ({"num_train_epochs": 2, "num_generations": 4, "per_device_train_batch_size": 8}, "max_steps", 16),
    ({"max_steps": 5, "warmup_steps": 0.4}, "optim.warmup_steps", 2),
    ({"use_bias_correction_kl": False}, "algorithm.kl_estimator", "k3"),
    ({"report_to": ["wandb", "tensorboard"]}, "logging.report_to", ["wandb", "tensorboard"]),
    ({"eval_strategy": "steps", "eval_steps": 5}, "eval_every", 5),
    ({"sync_ref_model": True, "ref_model_mixup_alpha": 1.0, "ref_model_sync_steps": 4}, "algorithm.ref_refresh_steps",
     4),
    ({"use_vllm": True, "vllm_mode": "server", "vllm_server_port": 8001}, "generation.vllm.url",
     "http://0.0.0.0:8001"),
    ({"use_vllm": True}, "algorithm.rollout_correction.level", "sequence"),
    ({"save_strategy": "no"}, "save_every", 0),
    ({"bf16": True}, "model.dtype", "bfloat16"),
])
def test_each_mapped_argument_lands_on_rlvrs_setting(given, key, expected):
    assert translate(given, ROWS).settings[key] == expected


@pytest.mark.parametrize("given, named", [
    ({"fp16": True}, "fp16"), ({"loss_type": "vespo"}, "loss_type"), ({"optim": "adafactor"}, "optim"),
    ({"sync_ref_model": True}, "ref_model_mixup_alpha"), ({"push_to_hub": True}, "push_to_hub"),
    ({"generation_batch_size": 64}, "generation_batch_size"), ({"lr_scheduler_type": "polynomial"},
                                                               "lr_scheduler_type"),
    ({"deepspeed": "ds.json"}, "deepspeed"), ({"learning_rat": 1e-5}, "learning_rate"),
])
def test_what_rlvr_does_not_support_is_one_line_naming_it(given, named):
    with pytest.raises(UserError) as e:
        translate(given, ROWS)
    assert "\n" not in str(e.value) and named in str(e.value)


def test_a_stream_without_max_steps_is_one_line():
    with pytest.raises(UserError, match="give GRPOConfig\\(max_steps=...\\)"):
        translate({}, None)
    assert translate({"max_steps": 3}, None).settings["max_steps"] == 3


def test_every_trl_name_rlvr_recognises_is_in_the_porting_guide():
    from pathlib import Path

    from rlvr.config.trl_names import TRL_NAMES

    guide = (Path(__file__).resolve().parents[2] / "docs" / "from_trl.md").read_text()
    missing = [name for name in TRL_NAMES if f"`{name}`" not in guide]
    assert not missing, f"docs/from_trl.md does not name {missing}"


@pytest.mark.parametrize("given, key, expected", [
    ({"max_prompt_length": 256}, "data.max_prompt_tokens", 256),
    ({"max_steps": 10, "warmup_ratio": 0.25}, "optim.warmup_steps", 3),
    ({"max_steps": 10, "num_iterations": 2, "warmup_ratio": 0.25}, "optim.warmup_steps", 3),  # of 10 updates
    ({"max_steps": 10, "warmup_steps": 4, "warmup_ratio": 0.5}, "optim.warmup_steps", 4),  # steps over the ratio
    ({"evaluation_strategy": "steps", "eval_steps": 5}, "eval_every", 5),
    ({"no_cuda": True}, "model.device", "cpu"),
])
def test_arguments_older_trl_and_transformers_took_land_where_rlvr_has_them(given, key, expected):
    translation = translate(given, ROWS)
    assert translation.settings[key] == expected
    assert all("\n" not in note for note in translation.notes)


def test_a_gone_argument_is_noted_taken_at_its_old_default_or_refused_as_gone_from_trl():
    assert "starts afresh" in " ".join(translate({"overwrite_output_dir": True}, ROWS).notes)
    assert translate({"use_liger_loss": False}, ROWS).settings == translate({}, ROWS).settings
    with pytest.raises(UserError, match="use_liger_loss=True is gone from TRL"):
        translate({"use_liger_loss": True}, ROWS)
    with pytest.raises(UserError, match="give eval_strategy alone"):
        translate({"evaluation_strategy": "steps", "eval_strategy": "steps"}, ROWS)


def test_max_steps_counts_optimizer_steps_as_in_trl():
    """TRL's max_steps are optimizer steps; rlvr's sampled batches take num_iterations of them each."""
    translation = translate({"max_steps": 10, "num_iterations": 4}, ROWS)
    assert translation.settings["max_steps"] == 3 and translation.settings["algorithm.updates_per_batch"] == 4
    assert any("counts optimizer steps" in note for note in translation.notes)
    assert translate({"max_steps": 10}, ROWS).settings["max_steps"] == 10


@pytest.mark.parametrize(("given", "said"), [
    ({"max_steps": "2"}, "max_steps='2' is a str: give a number"),
    ({"num_train_epochs": "1"}, "num_train_epochs='1' is a str: give a number"),
    ({"warmup_steps": "0.1"}, "warmup_steps='0.1' is a str: give a number"),
    ({"per_device_train_batch_size": "8", "gradient_accumulation_steps": 2},
     "per_device_train_batch_size='8' is a str"),
    ({"fp16": "no"}, "fp16='no' is a str: give True or False"),
])
def test_an_argument_of_the_wrong_type_is_one_line(given, said):
    with pytest.raises(UserError, match=f"^GRPOConfig argument {said}"):
        translate(given, 100)


def test_fractional_save_and_eval_steps_are_a_share_of_the_run_as_in_trl():
    """transformers reads save_steps and eval_steps below 1 as a ratio of the total steps (rounded up)."""
    given = {"save_steps": 0.5, "eval_strategy": "steps", "eval_steps": 0.25, "max_steps": 10}
    settings = translate(given, 100).settings
    assert (settings["save_every"], settings["eval_every"]) == (5, 3)
    assert translate({"save_steps": 4, "max_steps": 10}, 100).settings["save_every"] == 4
