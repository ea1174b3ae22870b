"""rlvr.SFT, rlvr.RewardModel and rlvr.PPO: the rest of DeepSeek-R1's recipe from Python, with GRPO's conventions
(rows in memory or `datasets` objects, callbacks, resume and overwrite), each the same run as its command's."""

import json

import datasets
import pytest

from rlvr import PPO, SFT, RewardModel, UserError
from rlvr.reward_models.train import train_reward_model
from rlvr.sft.train import train_sft

from ..reward_models.conftest import tiny_rm_config, write_pairs
from ..sft.conftest import echo_rows, tiny_sft_config, write_rows
from .test_grpo import ROWS, TINY, metrics

SFT_SETTINGS = {"eval_fraction": 0.25, "batch_size": 8, "max_steps": 4, "threads": 1, "tensorboard": False,
                "optim": {"lr": 3e-3, "schedule": "constant"}}


def test_sft_on_rows_in_memory_is_the_run_of_the_same_rows_in_a_file(tmp_path):
    rows = echo_rows()
    named = train_sft(tiny_sft_config(write_rows(tmp_path / "rows.jsonl", rows), tmp_path / "file", max_steps=4))
    seen = []
    sft = SFT("tiny", train_data=datasets.Dataset.from_list(rows), output_dir=tmp_path / "memory",
              callbacks=[lambda step, logged: seen.append(step)], **SFT_SETTINGS)
    given = sft.train()
    assert metrics(tmp_path / "memory") == metrics(tmp_path / "file") and seen == [1, 2, 3, 4]
    assert given["after"] == named["after"]
    assert (tmp_path / "memory" / "inputs" / "train.jsonl").read_text() == (tmp_path / "rows.jsonl").read_text()
    with pytest.raises(UserError, match="already holds a run"):
        SFT("tiny", train_data=rows, output_dir=tmp_path / "memory", **SFT_SETTINGS).train()
    more = SFT("tiny", train_data=rows, output_dir=tmp_path / "memory", **{**SFT_SETTINGS, "max_steps": 5})
    assert more.train(resume=True)["steps"] == 5
    assert SFT("tiny", train_data=rows, output_dir=tmp_path / "memory", **SFT_SETTINGS).train(overwrite=True)[
        "steps"] == 4
    assert (sft.save(tmp_path / "saved") / "config.json").is_file()
    with pytest.raises(UserError, match=r"^save\(5\): give the folder to write as a str or Path$"):
        sft.save(5)


def test_an_output_dir_of_another_kind_is_one_line_and_one_callback_may_be_given_alone(tmp_path):
    for wrong in (123, ["r"]):
        with pytest.raises(UserError, match=r"^output_dir=.* is an? (int|list): give the run directory's path"):
            SFT("tiny", train_data=echo_rows(), output_dir=wrong, **SFT_SETTINGS)
    with pytest.raises(UserError, match=r"^model is a list: the first argument is the model .*; give the rows as "
                                        r"train_data=$"):
        SFT(echo_rows(), output_dir=tmp_path / "rows", **SFT_SETTINGS)
    with pytest.raises(UserError, match=r"^no SFT data: give train_data= \(rows of one"):
        SFT("tiny", output_dir=tmp_path / "none", **SFT_SETTINGS).train()
    seen = []
    SFT("tiny", train_data=echo_rows(), output_dir=tmp_path / "one", callbacks=lambda step, m: seen.append(step),
        **{**SFT_SETTINGS, "max_steps": 2}).train()
    assert seen == [1, 2]


def test_a_reward_model_from_rows_in_memory_is_the_run_of_the_same_rows_in_a_file(tmp_path):
    path = write_pairs(tmp_path / "pairs.jsonl", n=32)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    named = train_reward_model(tiny_rm_config(path, tmp_path / "file", max_steps=3))
    rm = RewardModel("tiny", train_data=rows, output_dir=tmp_path / "memory", eval_fraction=0.25, lr=1e-3,
                     batch_size=8, max_steps=3, threads=1)
    given = rm.train()
    assert metrics(tmp_path / "memory") == metrics(tmp_path / "file")
    assert {k: v for k, v in given.items() if "seconds" not in k and k not in ("run_dir", "data", "checkpoint")} == {
        k: v for k, v in named.items() if "seconds" not in k and k not in ("run_dir", "data", "checkpoint")}


def test_ppo_from_python_trains_its_critic_with_a_reward_function(tmp_path):
    def has_digit(completions, **kwargs):
        return [float(any(ch.isdigit() for ch in c[0]["content"])) for c in completions]

    ppo = PPO("tiny", rewards=[has_digit], train_data=ROWS, max_steps=2, config=TINY, eval_before=False,
              eval_after=False, output_dir=tmp_path / "ppo")
    summary = ppo.train()
    logged = metrics(tmp_path / "ppo")
    assert summary["steps"] == 2 and len(logged) == 2 and all("value_loss" in m for m in logged)
    assert repr(ppo).startswith("PPO(output_dir=")
