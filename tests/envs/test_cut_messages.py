"""A message cut at the message budget before the model closed its turn (rlvr.envs.rollout): by default it ends
the conversation without asking the environment, counted as env/cut_before_reply and warned about when most
conversations end so; environment.reply_to_cut hands the cut message to step() and the conversation goes on."""

import pytest

from rlvr.envs import rollout as conv
from rlvr.envs import sampling
from rlvr.envs.sampling import env_metrics, warn_if_mostly_cut

from .test_converse import Scripted, run, scripted_model


def cut_budget(tokenizer):
    return len(tokenizer("a long message cut", add_special_tokens=False).input_ids)


def test_a_cut_message_ends_the_conversation_unasked_and_is_counted(tiny, monkeypatch):
    _, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ["a long message cut~", "1"])
    env = Scripted(["more", "more"])
    (t,) = run(tiny, [env], new_tokens=cut_budget(tokenizer))
    assert t.done and t.truncated and t.info["turns"] == 1.0 and t.info["cut_before_reply"] == 1.0
    assert len(t.messages) == 2  # the question and the cut message: no reply of the environment was added


def test_a_message_closed_by_the_model_is_not_counted(tiny, monkeypatch):
    _, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ["1", "2"])
    (t,) = run(tiny, [Scripted(["more"])])
    assert t.info.get("cut_before_reply", 0.0) == 0.0 and not t.truncated


def test_reply_to_cut_hands_the_cut_message_to_the_environment_and_the_conversation_goes_on(tiny, monkeypatch):
    model, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ["a long message cut~", "2"])
    env = Scripted(["more"])
    trajectories = [conv.start(tokenizer, [{"role": "user", "content": "Guess."}])]
    (t,) = conv.converse(model, tokenizer, trajectories, [env], conv.SamplingParams(cut_budget(tokenizer), 1.0),
                         max_turns=4, max_tokens=400, stop_ids=[tokenizer.eos_token_id], seeds=[0],
                         reply_to_cut=True)
    assert env.seen == ["a long message cut", "2"] and t.info["turns"] == 2.0
    assert [m["content"] for m in t.messages] == ["Guess.", "a long message cut", "more", "2"]
    assert t.done and not t.truncated and t.info.get("cut_before_reply", 0.0) == 0.0
    # the turn the model never closed is closed by the context (the template's end marker, not a model token)
    rendered = tokenizer.apply_chat_template(t.messages, tokenize=False)
    assert tokenizer.decode([*t.prompt_ids, *t.ids]) == rendered.rstrip("\n")


def test_the_share_is_a_metric_and_most_conversations_cut_is_one_warning(capsys, monkeypatch):
    monkeypatch.setattr(sampling, "_WARNED", [])
    cut, whole = conv.Trajectory([1], []), conv.Trajectory([1], [])
    cut.info, whole.info = {"turns": 1.0, "cut_before_reply": 1.0}, {"turns": 2.0}
    assert env_metrics([cut.info, whole.info, whole.info, whole.info])["env/cut_before_reply"] == 0.25
    warn_if_mostly_cut([cut, whole], 64)
    assert capsys.readouterr().err == ""  # half is not most
    warn_if_mostly_cut([cut, cut, whole], 64)
    warn_if_mostly_cut([cut, cut, whole], 64)
    said = capsys.readouterr().err.strip().splitlines()
    assert said == ["rlvr: 2 of 3 conversations ended at a message cut at generation.max_new_tokens=64 before the "
                    "environment could reply (env/cut_before_reply): raise it, or set environment.reply_to_cut: "
                    "true (docs/environments.md)"]


@pytest.mark.parametrize("reply_to_cut", [False, True])
def test_a_run_records_the_setting_and_the_metric(tmp_path, reply_to_cut):
    import json

    from rlvr.grpo.trainer import train_grpo

    from ..train.test_step import tiny_config

    config = tiny_config(tmp_path, "environment.name=guess_number", "environment.max_turns=2",
                         "rewards=[environment_reward]", "eval_before=false", "eval_after=false",
                         f"environment.reply_to_cut={str(reply_to_cut).lower()}", "generation.max_new_tokens=4",
                         steps=1)
    train_grpo(config)
    metrics = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    # the random tiny model almost never closes a 4-token message: without reply_to_cut nearly every
    # conversation is one cut message; with it, they go on to the turn limit
    assert (metrics["env/cut_before_reply"] > 0.5) != reply_to_cut
    assert (metrics["env/turns"] > 1.5) == reply_to_cut
