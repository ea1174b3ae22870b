"""Unscored completions (a reward returning None or NaN: "does not apply", or no verdict) never crash a run:
every place a reward is printed, logged, charted or written shows them as unscored, and the run ends."""

import json

import pytest

from rlvr import paths
from rlvr.dashboard.report import write_report
from rlvr.dashboard.server import run_page
from rlvr.grpo.trainer import train_grpo

from .test_step import REWARD_FNS, tiny_config


def strict_json(line):
    """json.loads that refuses NaN and Infinity, as every other JSON reader does."""
    return json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} written into a JSON file"))


@pytest.mark.parametrize("fn", ["none_for_odd_answers", "nan_for_odd_answers", "none_for_all"])
def test_a_run_whose_rewards_are_none_or_nan_records_them_as_unscored(tmp_path, capsys, fn):
    rewards = f"rewards=[{{name: '{REWARD_FNS}:{fn}', correctness: true}}]"
    summary = train_grpo(tiny_config(tmp_path, rewards, "sample_every=1", "eval_before=false", "eval_after=false",
                                     steps=2))
    run = tmp_path / "run"
    assert summary["steps"] == 2 and paths.latest_checkpoint(run).name == "step-000002"
    metrics = [strict_json(line) for line in (run / paths.METRICS).read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and sum(m["reward/unscored"] for m in metrics) >= 4
    if fn == "none_for_all":
        assert all(m["reward/mean"] is None and m["accuracy"] is None for m in metrics)
    groups = [strict_json(line) for line in (run / paths.SAMPLES).read_text().splitlines()]
    rewards = [r for g in groups for r in g["rewards"]]
    assert None in rewards and all(r is None or isinstance(r, float) for r in rewards)
    unscored = [a for g in groups for r, a in zip(g["rewards"], g["advantages"]) if r is None]
    assert unscored and all(a == 0.0 for a in unscored)  # left out of the loss, not given a reward of 0
    if fn == "none_for_all":  # the console shows the first group's completions
        assert "reward unscored  advantage +0.00" in capsys.readouterr().out
    for html in (write_report([run], tmp_path / "report.html").read_text(), run_page(run, None)):
        assert '<tr class="c unscored"><td>unscored</td>' in html and "None" not in html.partition("groups")[2]


def test_tensorboard_shows_unscored_rewards_in_its_sample_table(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rewards = f"rewards=[{{name: '{REWARD_FNS}:none_for_all', correctness: true}}]"
    train_grpo(tiny_config(tmp_path, rewards, "sample_every=1", "eval_before=false", "eval_after=false",
                           "logging.report_to=[tensorboard]", steps=1))
    events = EventAccumulator(str(tmp_path / "run" / paths.TENSORBOARD), size_guidance={"tensors": 0}).Reload()
    table = events.Tensors("samples/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "| unscored |" in table and "None" not in table
