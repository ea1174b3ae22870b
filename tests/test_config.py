"""rlvr.config / rlvr.config_loading: presets, file + overrides, and one-line errors."""

import pytest
import yaml

from rlvr.config import PRESETS, TrainConfig
from rlvr.config_loading import config_to_yaml, load_config
from rlvr.errors import UserError


def test_defaults_are_the_seed_preset():
    c = load_config()
    assert c.preset == "seed"
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
    f.write_text("preset: dapo\nalgorithm:\n  clip_high: 0.3\nsampling:\n  temperature: 0.9\n")
    c = load_config(f, ["sampling.temperature=0.5"], max_steps=7)
    assert c.algorithm.clip_high == 0.3  # file beats preset
    assert c.algorithm.loss_aggregation == "token_mean"  # preset beats default
    assert c.sampling.temperature == 0.5  # override beats file
    assert c.max_steps == 7


def test_effective_config_round_trips(tmp_path):
    c = load_config(None, ["sampling.top_k=5", "optim.lr=3e-6"])
    f = tmp_path / "config.yaml"
    f.write_text(config_to_yaml(c))
    assert load_config(f) == c
    assert yaml.safe_load(f.read_text())["optim"]["lr"] == 3e-6


def test_rewards_list(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("rewards:\n  - name: math_accuracy\n  - name: boxed_format\n    weight: 0.5\n")
    c = load_config(f)
    assert [(r.name, r.weight) for r in c.rewards] == [("math_accuracy", 1.0), ("boxed_format", 0.5)]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["sampling.grup_size=4"], "unknown config key 'sampling.grup_size'; did you mean 'sampling.group_size'?"),
        (["lerning_rate=1"], "unknown config key 'lerning_rate'"),
        (["sampling.batch_size=30"], "not divisible by sampling.group_size=8"),
        (["optim.lr=fast"], "'optim.lr' must be float"),
        (["max_steps=2.5"], "'max_steps' must be int"),
        (["algorithm.kl_estimator=k4"], "must be one of ['k1', 'k2', 'k3']"),
        (["preset=drgrpo"], "did you mean 'dr_grpo'?"),
        (["sampling.temperature=0"], "temperature must be > 0"),
        (["sampling.group_size=1", "sampling.batch_size=8"], "at least 2 completions"),
        (["algorithm.ref_refresh_steps=5", "algorithm.beta=0"], "needs beta > 0"),
        (["sampling=3"], "must be a mapping"),
        (["no_equals_sign"], "KEY=VALUE"),
        (["eval_before=yes please"], "'eval_before' must be bool"),
        (["model.device=gpu0"], "model.device='gpu0' is not a device: use auto, cpu, cuda or cuda:N"),
        (["model.dtype=fp16"], "must be one of ['auto', 'float32', 'bfloat16']"),
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
    """One config, documented once: each field carries the string literal under it."""
    import ast
    import inspect

    import rlvr.config as module

    tree = ast.parse(inspect.getsource(module))
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        body = cls.body
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign) and cls.name != "TrainConfig" or (
                isinstance(node, ast.AnnAssign) and node.annotation and "Config" not in ast.unparse(node.annotation)
            ):
                nxt = body[i + 1] if i + 1 < len(body) else None
                assert isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant), f"{cls.name}.{ast.unparse(node.target)} has no docstring"
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
