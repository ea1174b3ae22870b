"""A run's rewards (rlvr.train.reward_setup): which one is `accuracy`."""

import json

import pytest
import yaml

from rlvr.config import load_config
from rlvr.errors import UserError
from rlvr.rewards.registry import ANSWER_CHECKS, BUILTIN_REWARDS
from rlvr.train.reward_setup import correctness_entry
from rlvr.train.trainer import Trainer, train_grpo

from .test_step import REWARD_FNS, tiny_config

QUIET = ["eval_before=false", "eval_after=false"]


def mine(fn, **settings):
    """A config entry for a reward of tests/train/reward_fns.py."""
    return {"name": f"{REWARD_FNS}:{fn}", **settings}


def rewards(*entries):
    """A --set override listing `entries` (names or mappings)."""
    return "rewards=" + json.dumps([{"name": e} if isinstance(e, str) else e for e in entries])


def chosen(*entries):
    """The correctness reward's name among `entries`, as the config gives them."""
    config = load_config(None, [rewards(*entries)])
    entry = correctness_entry(config.rewards)
    return None if entry is None else entry.name


def one_line(error):
    return str(error.value) if "\n" not in str(error.value) else pytest.fail(f"two lines: {error.value}")


def test_a_format_reward_listed_first_is_never_accuracy():
    assert chosen("boxed_format", "math_accuracy") == "math_accuracy"
    assert chosen("boxed_format", mine("check", correctness=True)) == f"{REWARD_FNS}:check"


@pytest.mark.parametrize("name", [*ANSWER_CHECKS, "math", "code", "countdown"])
def test_a_built_in_verifier_is_accuracy_without_being_marked(name):
    assert chosen("boxed_format", mine("digit_share", correctness=False), name, "overlong_penalty") == name


@pytest.mark.parametrize("name", sorted(set(BUILTIN_REWARDS) - set(ANSWER_CHECKS)))
def test_built_ins_that_check_no_answers_make_a_run_without_accuracy(name):
    assert chosen(name) is None
    assert chosen(name, mine("digit_share", correctness=False)) is None


def test_two_rewards_marked_correctness_are_one_line_when_the_config_loads():
    with pytest.raises(UserError) as e:
        load_config(None, [rewards(mine("a", correctness=True), mine("b", correctness=True))])
    assert "both say correctness: true" in one_line(e) and f"{REWARD_FNS}:b" in str(e.value)


def test_two_verifiers_need_one_marked():
    with pytest.raises(UserError) as e:
        chosen("math_accuracy", "math_accuracy_lenient")
    assert "both check answers" in one_line(e) and "correctness: true" in str(e.value)
    assert chosen("math_accuracy", {"name": "math_accuracy_lenient", "correctness": True}) == "math_accuracy_lenient"
    assert chosen({"name": "math_accuracy", "correctness": False}, "math_accuracy_lenient") == "math_accuracy_lenient"


def test_your_own_rewards_unmarked_are_one_line_naming_the_fix():
    """rlvr cannot read what a function checks: with no verifier listed, one of yours must say."""
    for entries in [(mine("check"),), ("boxed_format", mine("check")), (mine("a"), mine("b"), "overlong_penalty")]:
        with pytest.raises(UserError) as e:
            chosen(*entries)
        assert "no reward is known to check answers" in one_line(e) and "correctness: true" in str(e.value)
    assert chosen("boxed_format", mine("check", correctness=False)) is None  # none of them does: said so


def test_a_reward_that_checks_no_answers_cannot_be_marked_correctness():
    for name in ("boxed_format", "overlong_penalty", "reward_model"):
        with pytest.raises(UserError) as e:
            chosen({"name": name, "correctness": True}, "math_accuracy")
        assert f"reward '{name}' is marked correctness: true, but it does not check" in one_line(e)
    assert chosen({"name": "environment_reward", "correctness": True}) == "environment_reward"  # its environment's


def test_the_flagged_reward_is_logged_as_accuracy_and_followed_by_the_curriculum(tmp_path):
    """Rewards 1 for every completion (listed first) and 0 (marked): `accuracy` and the curriculum's pass
    rates are the marked one's 0, not the first one's 1."""
    config = tiny_config(tmp_path, rewards(mine("always_one"), mine("always_zero", correctness=True)),
                         "data.curriculum=true", *QUIET)
    trainer = Trainer(config)
    assert trainer.parts.correctness == f"{REWARD_FNS}:always_zero"
    metrics = trainer.step().metrics
    assert metrics["accuracy"] == 0.0 and metrics["reward/mean"] == 1.0
    seen = [rate for rate in trainer.prompts.pass_rates if rate is not None]
    assert seen and set(seen) == {0.0}


def test_a_run_whose_rewards_check_no_answers_logs_no_accuracy_and_refuses_the_curriculum(tmp_path):
    penalty = "rewards=[{name: overlong_penalty, params: {max_tokens: 12, cache_tokens: 4}}]"
    metrics = Trainer(tiny_config(tmp_path, penalty, *QUIET)).step().metrics
    assert "accuracy" not in metrics and "reward/overlong_penalty/mean" in metrics
    with pytest.raises(UserError) as e:
        Trainer(tiny_config(tmp_path, penalty, "data.curriculum=true"))
    assert "data.curriculum follows the correctness reward" in one_line(e)


def test_the_effective_config_records_the_correctness_reward(tmp_path):
    """The data's own rewards (none named) are written out as run, the verifier marked; the file, loaded
    again, makes the same choice."""
    train_grpo(tiny_config(tmp_path, *QUIET, steps=1))
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["rewards"]
    assert [(r["name"], r["correctness"]) for r in written] == [("math_accuracy", True), ("boxed_format", False)]
    assert correctness_entry(load_config(tmp_path / "run" / "config.yaml").rewards).name == "math_accuracy"
