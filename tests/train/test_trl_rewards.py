"""Reward functions written for TRL and open-r1 run unchanged: the conversational form with the chat
template, the gold answer as `solution`, and reward factories named in the config with their params."""

import pytest

from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer
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
