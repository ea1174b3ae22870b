"""A run's rewards set up before the model loads (rlvr.rl.reward_setup): which one is `accuracy`, and
whether the training rows have what each needs."""

import json

import pytest
import yaml

from rlvr.config import load_config
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.rewards.registry import ANSWER_CHECKS, BUILTIN_REWARDS
from rlvr.rl import build
from rlvr.rl.reward_setup import correctness_entry

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


# ── which reward is `accuracy` ─────────────────────────────────────────────────────────────────

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


def test_of_two_verifiers_the_first_listed_is_accuracy_unless_one_is_marked():
    assert chosen("math_accuracy", "math_accuracy_lenient") == "math_accuracy"
    assert chosen("math_accuracy_lenient", "math_accuracy") == "math_accuracy_lenient"
    assert chosen("math_accuracy", {"name": "math_accuracy_lenient", "correctness": True}) == "math_accuracy_lenient"
    assert chosen({"name": "math_accuracy", "correctness": False}, "math_accuracy_lenient") == "math_accuracy_lenient"


def test_of_your_own_rewards_unmarked_the_first_listed_is_accuracy():
    """open-r1 and TRL scripts list the accuracy reward first: [accuracy, format] runs as it is."""
    assert chosen(mine("a"), mine("b")) == mine("a")["name"]
    assert chosen(mine("b"), mine("a"), "overlong_penalty") == mine("b")["name"]
    assert chosen("boxed_format", mine("a", correctness=False), mine("b")) == mine("b")["name"]
    assert chosen(mine("a"), mine("b", correctness=True)) == mine("b")["name"]
    assert chosen("boxed_format", mine("check", correctness=False)) is None  # none of them does: said so


def test_a_choice_made_by_the_order_of_the_list_is_said_in_one_line(capsys):
    config = load_config(None, [rewards(mine("a"), mine("b"))])
    correctness_entry(config.rewards, say=True)
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [f"rlvr: `accuracy` follows reward '{REWARD_FNS}:a', the first listed that may check answers; "
                    "to follow another, mark it correctness: true"]
    for alone in ([mine("a")], [mine("a"), "boxed_format"], [mine("a", correctness=True), mine("b")]):
        correctness_entry(load_config(None, [rewards(*alone)]).rewards, say=True)
        assert capsys.readouterr().err == ""  # no choice was made: nothing said


def test_your_own_reward_is_the_correctness_reward_when_nothing_else_could_be():
    """TRL's usual single reward, or one of yours beside built-ins that check no answers."""
    assert chosen(mine("check")) == mine("check")["name"]
    assert chosen("boxed_format", mine("check"), "overlong_penalty") == mine("check")["name"]


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
    seen = [rate for rate in trainer.source.prompts.pass_rates if rate is not None]
    assert seen and set(seen) == {0.0}


def test_a_run_whose_rewards_check_no_answers_logs_no_accuracy_and_refuses_the_curriculum(tmp_path, monkeypatch):
    penalty = "rewards=[{name: overlong_penalty, params: {max_tokens: 12, cache_tokens: 4}}]"
    metrics = Trainer(tiny_config(tmp_path, penalty, *QUIET)).step().metrics
    assert "accuracy" not in metrics and "reward/overlong_penalty/mean" in metrics
    loaded = never_loaded(monkeypatch)
    with pytest.raises(UserError) as e:
        Trainer(tiny_config(tmp_path, penalty, "data.curriculum=true"))
    assert "data.curriculum follows the correctness reward" in one_line(e) and not loaded


def test_the_effective_config_records_the_correctness_reward(tmp_path):
    """The data's own rewards (none named) are written out as run, the verifier marked; the file, loaded
    again, makes the same choice."""
    train_grpo(tiny_config(tmp_path, *QUIET, steps=1))
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["rewards"]
    assert [(r["name"], r["correctness"]) for r in written] == [("math_accuracy", True), ("boxed_format", False)]
    assert correctness_entry(load_config(tmp_path / "run" / "config.yaml").rewards).name == "math_accuracy"


# ── what the rewards read, checked before the model loads ───────────────────────────────────────

def never_loaded(monkeypatch):
    """Calls of the model loader: a check that comes before it leaves the list empty."""
    calls = []

    def load(*args, **kwargs):
        calls.append(args)
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(build, "load_configured", load)
    return calls


def rows_file(tmp_path, *rows):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"What is {i} + 1?", **row}) + "\n" for i, row in enumerate(rows)))
    return path


def test_a_missing_answer_column_is_one_line_from_the_cli_before_the_model_loads(tmp_path, monkeypatch, capsys):
    from rlvr.cli import main

    data = rows_file(tmp_path, *[{"level": 1}] * 8)
    loaded = never_loaded(monkeypatch)
    code = main(["train", "--set", "model.name=tiny", "--set", f"data.train={data}",
                 "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not loaded and "\n" not in err
    assert err == (f"rlvr: error: reward 'math_accuracy' (the data's default, as the config names no rewards) needs "
                   f"a column 'answer', which the training rows of {data} do not have (their columns besides the "
                   "prompt: level); add it to the rows, or name rewards they can be scored by")


@pytest.mark.parametrize("entry, column", [
    (mine("needs_level", correctness=True), "level"),  # your own function's required keyword
    ({"name": "countdown"}, "numbers"),
    ({"name": "math_accuracy", "when": {"kind": "maths"}}, "kind"),  # the column `when` routes by
])
def test_a_column_any_reward_needs_is_checked_before_the_model_loads(tmp_path, monkeypatch, entry, column):
    data = rows_file(tmp_path, *[{"answer": "1"}] * 8)
    loaded = never_loaded(monkeypatch)
    with pytest.raises(UserError) as e:
        Trainer(tiny_config(tmp_path, f"data.train={data}", rewards(entry)))
    assert f"reward '{entry['name']}' needs a column '{column}'" in one_line(e) and not loaded
    assert "(their columns besides the prompt: answer, solution)" in str(e.value)


def test_a_reward_requiring_trls_environments_is_refused_before_the_model_loads(tmp_path, monkeypatch):
    data = rows_file(tmp_path, *[{"answer": "1"}] * 8)
    loaded = never_loaded(monkeypatch)
    with pytest.raises(UserError) as e:
        Trainer(tiny_config(tmp_path, f"data.train={data}", rewards(mine("needs_environments"), "math_accuracy")))
    assert one_line(e).startswith(f"reward '{REWARD_FNS}:needs_environments' takes 'environments', which TRL's "
                                  "GRPOTrainer passes and rlvr does not (") and not loaded


@pytest.mark.parametrize("column", ["trainer_state", "log_extra", "completions"])
def test_a_data_column_named_as_an_argument_rlvr_passes_is_refused_before_the_model_loads(tmp_path, monkeypatch,
                                                                                          column):
    data = rows_file(tmp_path, *[{"answer": "1", column: "early"}] * 8)
    loaded = never_loaded(monkeypatch)
    with pytest.raises(UserError) as e:
        Trainer(tiny_config(tmp_path, f"data.train={data}", rewards(mine("shaped_by_step"), "math_accuracy")))
    assert one_line(e).endswith(f"have a column '{column}', a name of the arguments rlvr passes every reward "
                                "itself, as TRL does: rename that column") and not loaded


def test_an_optional_column_is_not_required(tmp_path):
    data = rows_file(tmp_path, *[{"answer": "1"}] * 8)
    Trainer(tiny_config(tmp_path, f"data.train={data}", rewards(mine("level_if_given"), "math_accuracy")))


def test_gold_null_in_every_row_is_refused_before_the_model_loads(tmp_path, monkeypatch):
    data = rows_file(tmp_path, *[{"answer": None}] * 4, *[{"answer": " "}] * 4)
    loaded = never_loaded(monkeypatch)
    with pytest.raises(UserError) as e:
        Trainer(tiny_config(tmp_path, f"data.train={data}"))
    assert one_line(e) == (f"the correctness reward 'math_accuracy' has nothing to check answers against: 'answer' "
                           f"is null or empty in all 8 training rows of {data}; fill it in, or mark another reward "
                           "with correctness: true")
    assert not loaded


def test_gold_missing_in_some_rows_is_one_warning_with_the_count_and_those_rows_are_unscored(tmp_path, capsys):
    """Rows without an `answer` (null, or no such key where other rows have one) train without a crash: the
    correctness reward leaves them unscored, once said."""
    data = rows_file(tmp_path, *[{"answer": "1"}, {"answer": None}, {}, {"answer": "2"}] * 2)
    trainer = Trainer(tiny_config(tmp_path, f"data.train={data}", "sampling.batch_size=32", *QUIET))
    warning = [line for line in capsys.readouterr().err.splitlines() if "have no 'answer'" in line]
    assert warning == [f"rlvr: 4 of 8 training rows of {data} have no 'answer' (null or empty): the correctness "
                       "reward 'math_accuracy' leaves them unscored, so they learn from the other rewards alone "
                       "and count in neither `accuracy` nor the curriculum"]
    # the 8 rows, scored a group at a time (sampling.overlap_rewards)
    scored = trainer.source.score_round(0, 0, trainer.source.synced(), trainer.world)
    no_gold = [ex.columns["answer"] is None for ex in scored.rollout.examples]
    assert scored.reward_components["math_accuracy"].isnan().all(dim=1).tolist() == no_gold and sum(no_gold) == 4


def test_gold_is_counted_only_in_the_rows_a_routed_reward_scores(tmp_path, capsys):
    data = rows_file(tmp_path, *[{"answer": "1", "kind": "maths"}, {"answer": None, "kind": "chat"}] * 4)
    Trainer(tiny_config(tmp_path, f"data.train={data}",
                        rewards({"name": "math_accuracy", "when": {"kind": "maths"}}, "boxed_format")))
    assert "have no 'answer'" not in capsys.readouterr().err
