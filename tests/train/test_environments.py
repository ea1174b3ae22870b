"""GRPO with an environment (`environment.name`): conversations as samples, the environment's reward,
its counts in the step metrics, transcripts in samples.jsonl, and exact resume."""

import json

import pytest

from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.samplers import local as sampling_module

from .resumed import assert_resumes_exactly
from .test_step import tiny_config

GAME = ["environment.name=guess_number", "environment.params.max_turns=3", "environment.max_tokens=300",
        "rewards=[{name: environment_reward}]", "generation.max_new_tokens=6", "eval_before=false",
        "eval_after=false", "sample_every=1"]


@pytest.fixture(autouse=True)
def short_messages(monkeypatch):
    """The random tiny model seldom writes its end-of-turn token: any letter ends a message here, so
    that conversations run several turns."""
    real = sampling_module.stop_token_ids

    def stops(model, tokenizer):
        return [*real(model, tokenizer), *tokenizer("abcdefghijklmnopqrstuvwxyz", add_special_tokens=False).input_ids]

    monkeypatch.setattr(sampling_module, "stop_token_ids", stops)


def test_a_step_with_an_environment_trains_on_conversations(tmp_path, monkeypatch):
    from rlvr.envs.guess import GuessNumber

    seeds = []
    real_reset = GuessNumber.reset
    monkeypatch.setattr(GuessNumber, "reset", lambda self, row, messages, seed: seeds.append(seed) or real_reset(
        self, row, messages, seed))
    trainer = Trainer(tiny_config(tmp_path, *GAME))
    rollout = trainer.source.sample(trainer.source.prompts.next_batch(), 0, trainer.source.synced())
    assert rollout.model_mask is not None and (rollout.completion_mask & ~rollout.model_mask).any()  # context tokens
    g = rollout.group_size
    groups = [seeds[p * g:(p + 1) * g] for p in range(rollout.num_prompts)]
    assert all(len(set(s)) == 1 for s in groups) and len({s[0] for s in groups}) == len(groups)  # a group: one game
    assert max(info["turns"] for info in rollout.env_info) >= 2
    summary = train_grpo(tiny_config(tmp_path / "run2", *GAME))
    lines = [json.loads(x) for x in (tmp_path / "run2" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(line["env/turns"] >= 1 and "env/guesses" in line for line in lines)
    groups = [json.loads(x) for x in (tmp_path / "run2" / "run" / "samples.jsonl").read_text().splitlines()]
    transcript = groups[0]["transcripts"][0]
    assert transcript[0]["role"] == "assistant" and groups[0]["completions"][0] in [m["content"] for m in transcript]
    assert summary["steps"] == 2


def test_a_resumed_run_with_an_environment_equals_the_unbroken_run(tmp_path):
    assert_resumes_exactly(tmp_path, *GAME)  # the same games, the same conversations


def test_environment_mistakes_are_one_line_errors(tmp_path):
    with pytest.raises(UserError, match="did you mean 'guess_number'"):
        Trainer(tiny_config(tmp_path, "environment.name=gues_number"))
    with pytest.raises(UserError, match="set data.template to chat"):
        tiny_config(tmp_path, "environment.name=guess_number", "data.template=plain")
    with pytest.raises(UserError, match="needs multi-turn rollouts"):
        train_grpo(tiny_config(tmp_path / "x", "rewards=[{name: environment_reward}]", "eval_before=false"))


def test_held_out_evaluation_converses_with_the_environment_too(tmp_path, monkeypatch):
    from rlvr.envs.guess import GuessNumber

    resets = []
    real_reset = GuessNumber.reset
    monkeypatch.setattr(GuessNumber, "reset", lambda self, row, messages, seed: resets.append(seed) or real_reset(
        self, row, messages, seed))
    trainer = Trainer(tiny_config(tmp_path, *GAME, "data.eval_size=4"))
    first = trainer.evaluate()
    assert len(resets) == 2 * 4  # the held-out questions with the example exchange, and alone
    again = trainer.evaluate()
    assert resets[:8] == resets[8:] and first.result["strict_correct"] == again.result["strict_correct"]  # paired
    assert first.result["n"] == 4 and "alone" in first.result
