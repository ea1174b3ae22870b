"""rlvr.config / rlvr.config: presets, file + overrides, and one-line errors."""

from pathlib import Path

import pytest
import yaml

from rlvr.config import (
    PRESETS,
    EvalConfig,
    RewardModelConfig,
    SampleConfig,
    SFTConfig,
    TrainConfig,
    config_from_dict,
    config_to_yaml,
    load_command_config,
    load_config,
)
from rlvr.errors import UserError


def test_defaults_are_the_deepseekmath_preset_also_called_seed():
    c = load_config()
    assert c.preset == "deepseekmath"
    assert load_config(None, ["preset=seed"]) == c  # the name of earlier versions
    a = c.algorithm
    assert (a.std_estimator, a.loss_aggregation, a.beta, a.clip_low, a.clip_high, a.advantage_scale) == (
        "population", "sequence_mean", 0.04, 0.2, 0.2, "group_std")


def test_presets_are_independent_settings():
    dr = load_config(None, ["preset=dr_grpo"]).algorithm
    assert (dr.advantage_scale, dr.loss_aggregation, dr.beta) == ("none", "constant", 0.0)
    dapo = load_config(None, ["preset=dapo"]).algorithm
    assert (dapo.clip_high, dapo.loss_aggregation, dapo.beta, dapo.mask_truncated) == (0.28, "token_mean", 0.0, True)
    # every preset only names fields that exist
    for preset in PRESETS:
        load_config(None, [f"preset={preset}"])


def test_precedence_defaults_preset_file_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("preset: dapo\nalgorithm:\n  clip_high: 0.3\ngeneration:\n  temperature: 0.9\n")
    c = load_config(f, ["generation.temperature=0.5"], max_steps=7)
    assert c.algorithm.clip_high == 0.3  # file beats preset
    assert c.algorithm.loss_aggregation == "token_mean"  # preset beats default
    assert c.generation.temperature == 0.5  # override beats file
    assert c.max_steps == 7


def test_effective_config_round_trips(tmp_path):
    c = load_config(None, ["generation.top_k=5", "optim.lr=3e-6"])
    f = tmp_path / "config.yaml"
    f.write_text(config_to_yaml(c))
    assert load_config(f) == c
    assert yaml.safe_load(f.read_text())["optim"]["lr"] == 3e-6


def test_rewards_list(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("rewards:\n  - name: math_accuracy\n  - name: boxed_format\n    weight: 0.5\n")
    c = load_config(f)
    assert [(r.name, r.weight) for r in c.rewards] == [("math_accuracy", 1.0), ("boxed_format", 0.5)]


def test_a_reward_given_as_a_string_is_its_name():
    c = load_config(None, ["rewards=[{name: my.py:check, correctness: true}, boxed_format]"])
    assert [(r.name, r.correctness) for r in c.rewards] == [("my.py:check", True), ("boxed_format", None)]
    with pytest.raises(UserError, match=r"'data.few_shot\[0\]' must be a mapping"):  # (a section without a shorthand)
        load_config(None, ["data.few_shot=[hello]"])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["sampling.grup_size=4"], "unknown config key 'sampling.grup_size'; did you mean 'sampling.group_size'?"),
        (["lerning_rate=1"], "unknown config key 'lerning_rate'"),
        (["sampling.batch_size=30"], "not divisible by sampling.group_size=8"),
        (["optim.lr=fast"], "'optim.lr' must be float"),
        (["optim.lr=inf"], "optim.lr must be positive and finite, not inf"),
        (["rewards=[42]"], "config key 'rewards[0]' must be a name or a mapping with its name ({name: ...}), got 42"),
        (["rewards=[{func: x}]"], "unknown config key 'rewards[0].func'; this mapping has no name: it goes under "
                                  "'rewards[0].name'"),
        (["optim.lr=nan"], "optim.lr must be positive and finite, not nan"),
        (["optim.weight_decay=inf"], "optim.weight_decay must be >= 0 (the weight decay finite)"),
        (["max_steps=2.5"], "'max_steps' must be int"),
        (["algorithm.kl_estimator=k4"], "must be one of ['k1', 'k2', 'k3', 'k3+']"),
        (["preset=drgrpo"], "did you mean 'dr_grpo'?"),
        (["generation.temperature=0"], "generation.temperature=0.0 must be > 0"),
        (["sampling.temperature=0"], "generation.temperature=0.0 must be > 0"),
        (["sampling.group_size=1", "sampling.batch_size=8"], "at least 2 completions"),
        (["algorithm.ref_refresh_steps=5", "algorithm.beta=0"], "needs beta > 0"),
        (["sampling=3"], "must be a mapping"),
        (["no_equals_sign"], "KEY=VALUE"),
        (["eval_before=yes please"], "'eval_before' must be bool"),
        (["model.device=gpu0"], "model.device='gpu0' is not a device: use auto, cpu, cuda or cuda:N"),
        (["model.dtype=fp16"], "must be one of ['auto', 'float32', 'bfloat16']"),
        (["model.lora.rnk=8"], "did you mean 'model.lora.rank'?"),
        (["model.lora.rank=0"], "model.lora.rank=0 must be >= 1"),
        (["optim.logprob_micro_batch_tokens=0"], "optim.logprob_micro_batch_tokens must be >= 1"),
        (["model.lora.dropout=1"], "model.lora.dropout=1.0 must be in [0, 1)"),
        (["model.lora.target_modules=q_proj"], "'model.lora.target_modules' must be a list"),
        (["model.lora.rank=8", "algorithm.ref_refresh_steps=5"], "cannot refresh the reference with model.lora"),
        (["keep_checkpoints=-1"], "keep_checkpoints must be >= 0 (0 = keep every checkpoint)"),
        (["data.few_shot_share=1.5"], "data.few_shot_share=1.5 must be in [0, 1]"),
    ],
)
def test_bad_configs_are_one_line_errors(overrides, message):
    with pytest.raises(UserError) as e:
        load_config(None, overrides)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_files(tmp_path):
    with pytest.raises(UserError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("sampling: [1, 2\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(UserError, match="mapping"):
        load_config(listy)


def test_every_field_has_a_docstring():
    """One config, documented once: each field carries the string literal under it (a section is
    documented field by field in its own class)."""
    import ast
    import inspect

    from rlvr.config import commands, sections, train

    for module in (commands, sections, train):
        tree = ast.parse(inspect.getsource(module))
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            body = cls.body
            for i, node in enumerate(body):
                annotation = ast.unparse(node.annotation) if isinstance(node, ast.AnnAssign) else ""
                if not annotation or annotation.startswith("ClassVar") or annotation.endswith("Config"):
                    continue
                nxt = body[i + 1] if i + 1 < len(body) else None
                assert isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant), (
                    f"{cls.name}.{ast.unparse(node.target)} has no docstring")
    assert TrainConfig().model.name == "smollm2"


def test_reward_params_and_few_shot_parse(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(
        "rewards:\n  - name: overlong_penalty\n    params: {max_tokens: 64, cache_tokens: 16}\n"
        "data:\n  few_shot:\n    - prompt: 'What is 1 + 1?'\n      completion: '\\boxed{2}'\n"
    )
    c = load_config(f)
    assert c.rewards[0].params == {"max_tokens": 64, "cache_tokens": 16}
    assert c.data.few_shot[0].completion == "\\boxed{2}"
    with pytest.raises(UserError, match="mapping"):
        load_config(None, ["rewards=[{name: x, params: [1, 2]}]"])


def test_files_of_earlier_versions_load_and_mean_the_same(tmp_path):
    """Generation settings once lived under `sampling`, `model` was a string in four commands, and the
    reward model's optimizer settings were top-level: such files still load into the same config."""
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text("preset: seed\nmodel: {name: tiny}\n"
                   "sampling: {group_size: 4, batch_size: 8, max_new_tokens: 12, temperature: 1.0, top_k: 3}\n")
    new.write_text("model: tiny\nsampling: {group_size: 4, batch_size: 8}\n"
                   "generation: {max_new_tokens: 12, temperature: 1.0, top_k: 3}\n")
    assert load_config(old) == load_config(new)
    assert load_config(old).generation.top_p == 1.0  # untouched fields keep their defaults

    sft = load_command_config(SFTConfig, None, ["model=tiny", "cache_dir=/tmp/c", "data=rows.jsonl"])
    assert (sft.model.name, sft.model.cache_dir, sft.model.device) == ("tiny", "/tmp/c", "auto")
    rm = config_from_dict(RewardModelConfig, {"model": "tiny", "data": "p.jsonl", "lr": 1e-3, "max_grad_norm": 0.5})
    assert (rm.optim.lr, rm.optim.max_grad_norm, rm.optim.betas) == (1e-3, 0.5, (0.9, 0.999))
    flat = {"model": "tiny", "data": "arithmetic", "limit": 3, "template": "plain", "temperature": 0.9,
            "max_new_tokens": 8, "data_dir": "d", "difficulty": 2, "system_prompt": "s", "top_p": 0.5}
    for cls in (EvalConfig, SampleConfig):
        c = config_from_dict(cls, flat)
        assert (c.data.name, c.data.limit, c.data.template, c.data.dir, c.data.difficulty, c.data.system_prompt) == (
            "arithmetic", 3, "plain", "d", 2, "s")
        assert (c.generation.temperature, c.generation.max_new_tokens, c.generation.top_p) == (0.9, 8, 0.5)


def test_a_key_given_twice_under_two_names(tmp_path):
    """In one file, and on one command line, that is a contradiction (the later --set took it silently); a
    name given again on the command line is the later value, and a command's own flag wins over --set."""
    f = tmp_path / "c.yaml"
    f.write_text("sampling: {temperature: 0.5}\ngeneration: {temperature: 0.9}\n")
    with pytest.raises(UserError, match="'sampling.temperature' and 'generation.temperature' set the same thing"):
        load_config(f)
    for pair in (["sampling.temperature=0.5", "generation.temperature=0.9"],
                 ["generation.temperature=0.9", "sampling.temperature=0.5"]):
        first, again = (item.split("=")[0] for item in pair)
        with pytest.raises(UserError, match=f"--set {first} and --set {again} set the same thing: keep only "
                                            "generation.temperature"):
            load_config(None, pair)
    assert load_config(None, ["generation.temperature=0.9", "generation.temperature=0.5"]).generation.temperature == 0.5
    flag = {"generation.temperature": 0.5}  # (how a command's --temperature reaches load_config)
    assert load_config(None, ["sampling.temperature=0.9"], **flag).generation.temperature == 0.5


@pytest.mark.parametrize("cls", [EvalConfig, SampleConfig, SFTConfig, RewardModelConfig])
def test_every_command_shares_the_model_section(cls):
    with pytest.raises(UserError, match="model.device='gpu' is not a device"):
        load_command_config(cls, None, ["model.device=gpu", "data=x.jsonl"])
    assert load_command_config(cls, None, ["model=tiny", "data=x.jsonl"]).model.name == "tiny"


@pytest.mark.parametrize("cls", [TrainConfig, SFTConfig, RewardModelConfig])
@pytest.mark.parametrize("setting, message", [
    ("save_every=-1", "save_every must be >= 0 (0 = only at the end)"),
    ("eval_every=-2", "eval_every must be >= 0 (0 = only before and after)"),
    ("keep_checkpoints=-1", "keep_checkpoints must be >= 0 (0 = keep every checkpoint)"),
    ("threads=-1", "threads must be >= 0 (0 = all cores)"),
    ("distributed.timeout_s=0", "distributed.timeout_s"),
    ("logging.report_to=[nowhere]", "logging.report_to"),
])
def test_every_training_command_checks_its_run_section_alike(cls, setting, message):
    """The run section (rlvr.config.run.RunSection: the same top-level keys in every training command's config)
    is checked once, with the same words for every command."""
    with pytest.raises(UserError) as e:
        load_command_config(cls, None, [setting, "data=x.jsonl"] if cls is not TrainConfig else [setting])
    assert message in str(e.value)
    run = load_command_config(cls, None, ["keep_checkpoints=3", "eval_every=2", "output_dir=runs/x"]
                              + ([] if cls is TrainConfig else ["data=x.jsonl"]))
    assert (run.keep_checkpoints, run.eval_every, run.output_dir) == (3, 2, "runs/x")


@pytest.mark.parametrize("cls", [EvalConfig, SampleConfig])
def test_the_sampling_commands_refuse_to_train_adapters(cls):
    with pytest.raises(UserError, match="model.lora trains adapters, which rlvr .* does not"):
        load_command_config(cls, None, ["model.lora.rank=8", "data=x.jsonl"])
    assert load_command_config(cls, None, ["data=x.jsonl"]).model.lora is None


CONFIGS = sorted(Path(__file__).parents[1].glob("configs/*.yaml"))


@pytest.mark.parametrize("path", [p for p in CONFIGS if not p.stem.endswith("_sft")], ids=lambda p: p.name)
def test_every_shipped_config_loads_and_validates(path):
    config = load_config(str(path), [])
    assert config.max_steps > 0 and config.output_dir.startswith("runs/")


@pytest.mark.parametrize("path", [p for p in CONFIGS if p.stem.endswith("_sft")], ids=lambda p: p.name)
def test_every_shipped_sft_config_loads_and_names_data_that_exists(path):
    config = load_command_config(SFTConfig, str(path), [])
    assert (path.parents[1] / config.data).is_file() and config.output_dir.startswith("runs/")


def test_set_takes_text_as_typed_where_yaml_would_cut_it_or_read_a_mapping():
    """`--set 'data.system_prompt=... after ####'` lost everything from ` #` on (a YAML comment) without a word, and
    `--set 'data.template=Q: {prompt}'` was read as a mapping (a type error naming a dict); quoted, YAML reads it."""
    config = load_config(None, ["data.system_prompt=Reason, then give the answer after ####",
                                "data.template=Q: {prompt}", "rewards=[{name: boxed_format, weight: 0.5}]"])
    assert config.data.system_prompt == "Reason, then give the answer after ####"
    assert config.data.template == "Q: {prompt}" and config.rewards[0].weight == 0.5
    assert load_config(None, ["data.system_prompt='#1 rule: be brief'"]).data.system_prompt == "#1 rule: be brief"
