"""Reward functions written for TRL and open-r1 run unchanged: the conversational form with the chat
template, the gold answer as `solution`, and reward factories named in the config with their params."""

import json

import pytest

from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.rewards import load_reward_function

from .test_step import REWARD_FNS, tiny_config

QUIET = ["eval_before=false", "eval_after=false"]
TRL_STYLE = (f"rewards=[{{name: '{REWARD_FNS}:conversational_digits', correctness: true}}, "
             f"{{name: '{REWARD_FNS}:get_length_reward', params: {{scale: 0.5, cap: 8}}}}]")


def test_with_the_chat_template_rewards_get_trls_conversational_form_and_the_answer_as_solution(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, TRL_STYLE, *QUIET, steps=1))  # arithmetic, chat template
    metrics = trainer.step().metrics
    seen = trainer.parts.rewards[0].fn.__globals__["SEEN"][-1]  # the file is loaded by path, as a user's is
    assert all(p[-1]["role"] == "user" and isinstance(p[-1]["content"], str) for p in seen["prompts"])
    assert all(c == [{"role": "assistant", "content": c[0]["content"]}] for c in seen["completions"])
    answers = [ex.columns["answer"] for ex in [p.example for p in trainer.parts.train]]
    assert set(seen["solution"]) <= set(answers)
    # the factory was called once with its params; what it made scored every completion
    lengths = [min(len(c[0]["content"]), 8) * 0.5 for c in seen["completions"]]
    assert metrics[f"reward/{REWARD_FNS}:get_length_reward/mean"] == pytest.approx(sum(lengths) / len(lengths))


def test_without_the_chat_template_prompts_and_completions_stay_text(tmp_path):
    plain = (f"rewards=[{{name: '{REWARD_FNS}:digit_share', correctness: true}}, "
             f"{{name: '{REWARD_FNS}:get_length_reward', params: {{scale: 1.0}}}}]")
    trainer = Trainer(tiny_config(tmp_path, plain, "data.template=plain", *QUIET, steps=1))
    assert all(isinstance(ex.prompt, str) for ex in [p.example for p in trainer.parts.train])
    assert all(ex.columns["solution"] == ex.columns["answer"] for ex in [p.example for p in trainer.parts.train])
    trainer.step()


def test_the_rendered_prompt_is_the_same_in_either_form(tmp_path):
    from rlvr.data import render_prompt

    trainer = Trainer(tiny_config(tmp_path, TRL_STYLE, "data.few_shot=[]", *QUIET, steps=1))
    ex = trainer.parts.train[0].example
    as_text = render_prompt(ex.prompt[0]["content"], template="chat", tokenizer=trainer.tokenizer)
    assert trainer.parts.train[0].text == as_text


def test_factories_are_called_with_their_params_and_their_mistakes_are_one_line():
    made = load_reward_function(f"{REWARD_FNS}:get_length_reward", scale=2.0)
    assert made(completions=["abc", [{"role": "assistant", "content": "a"}]]) == [6.0, 2.0]
    with pytest.raises(UserError, match=r"reward factory '.*:get_length_reward' cannot take params \['skale'\]"):
        load_reward_function(f"{REWARD_FNS}:get_length_reward", skale=2.0)
    with pytest.raises(UserError, match="it was called as a factory, and it returned NoneType, not a reward function"):
        load_reward_function(f"{REWARD_FNS}:get_nothing")
    # a reward function with params is bound, not called
    assert load_reward_function(f"{REWARD_FNS}:digit_share")(completions=["a1"]) == [0.5]


def test_a_reward_whose_first_argument_is_misspelt_is_told_so_not_called_a_factory(tmp_path):
    (tmp_path / "typo.py").write_text("def r(completion):\n    return [1.0 for _ in completion]\n")
    with pytest.raises(UserError, match=r"reward '.*typo.py:r' takes no `completions` argument \(missing a required "
                                        r"argument: 'completion'\): a reward is called as f\(completions, "):
        load_reward_function(f"{tmp_path / 'typo.py'}:r")


# ── TRL's trainer_state, log_metric and log_extra (rlvr.rewards.trainer_hooks) ────────────────────────────────
SHAPED = (f"rewards=[{{name: '{REWARD_FNS}:digit_share', correctness: true}}, "
          f"{{name: '{REWARD_FNS}:shaped_by_step'}}]")


def run_rows(run, name):
    return [json.loads(line) for line in (run / name).read_text().splitlines()]


def test_a_reward_reads_its_steps_trainer_state_and_what_it_logs_is_kept(tmp_path):
    """μ = 2: TRL counts optimizer steps, so the second batch's state says 2; 2 prompts a batch of 32 rows."""
    train_grpo(tiny_config(tmp_path, SHAPED, *QUIET, "algorithm.updates_per_batch=2", "sample_every=1"))
    metrics, samples = run_rows(tmp_path / "run", "metrics.jsonl"), run_rows(tmp_path / "run", "samples.jsonl")
    assert [m["seen/global_step"] for m in metrics] == [0, 2] and [m["seen/max_steps"] for m in metrics] == [4, 4]
    assert [m["seen/epoch"] for m in metrics] == [0, 2 / 32]
    assert [m[f"reward/{REWARD_FNS}:shaped_by_step/mean"] for m in metrics] == [0.0, 1.0]  # (shaped by the step)
    assert samples and all(s["extra"]["chars"] == [len(c) for c in s["completions"]] for s in samples)


def test_groups_dynamic_sampling_drops_take_their_logged_columns_with_them(tmp_path):
    binary = (f"rewards=[{{name: '{REWARD_FNS}:has_digit', correctness: true}}, "
              f"{{name: '{REWARD_FNS}:shaped_by_step'}}]")  # (some groups informative, some not)
    train_grpo(tiny_config(tmp_path, binary, *QUIET, "sampling.dynamic_sampling=true", "sampling.max_sampling_rounds=3",
                           "sample_every=1", steps=2))
    metrics, samples = run_rows(tmp_path / "run", "metrics.jsonl"), run_rows(tmp_path / "run", "samples.jsonl")
    assert sum(m["sampling/dropped_groups"] for m in metrics) > 0  # (groups were dropped and replaced)
    assert samples and all(s["extra"]["chars"] == [len(c) for c in s["completions"]] for s in samples)


def test_sampled_ahead_a_batch_is_scored_with_its_own_steps_state(tmp_path):
    """Batch t + 1 is sampled while step t trains: its state is still step t + 1's, as in the synchronous run."""
    for name, staleness in (("sync", 0), ("ahead", 1)):
        train_grpo(tiny_config(tmp_path / name, SHAPED, *QUIET, "threads=1", f"sampling.max_staleness={staleness}",
                               steps=3))
    seen = {name: [m["seen/global_step"] for m in run_rows(tmp_path / name / "run", "metrics.jsonl")]
            for name in ("sync", "ahead")}
    assert seen == {"sync": [0, 1, 2], "ahead": [0, 1, 2]}


def test_a_metric_logged_under_a_name_rlvr_logs_is_one_line(tmp_path):
    clash = f"rewards=[{{name: '{REWARD_FNS}:digit_share', correctness: true}}, {{name: '{REWARD_FNS}:logs_loss'}}]"
    with pytest.raises(UserError, match=r"^a reward logged the metric 'loss' \(log_metric\), a name rlvr logs "
                                        r"itself: log it under another name$"):
        Trainer(tiny_config(tmp_path, clash, *QUIET, steps=1)).step()
