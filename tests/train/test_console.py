"""What the console and summary.json say about a run beyond its metrics (rlvr.run.tally): steps in a row without a
learning signal said as they happen, the bar's share of groups with a signal, skipped updates counted and the
time by phase at the end."""

import itertools
import json
from pathlib import Path

from rlvr.grpo.trainer import train_grpo
from rlvr.run.tally import SignalWatch, run_totals, time_line

from .test_step import tiny_config

REWARD_FNS = Path(__file__).with_name("reward_fns.py")
SILENT = {"zero_variance_fraction": 1.0, "update/skipped": 1.0}


def test_steps_without_a_signal_are_said_at_3_6_12_in_a_row_and_the_count_restarts_with_a_signal():
    watch = SignalWatch()
    said = [watch.see(SILENT) is not None for _ in range(12)]
    assert [i + 1 for i, s in enumerate(said) if s] == [3, 6, 12]
    assert watch.see({"zero_variance_fraction": 0.5, "update/skipped": 0.0}) is None
    assert [watch.see({"zero_variance_fraction": 1.0}) for _ in range(3)][2].startswith(
        "rlvr: no learning signal for 3 steps in a row")
    assert watch.see({"zero_variance_fraction": 0.99}) is None  # (one group with a signal is a signal)


def test_the_totals_come_from_every_step_of_metrics_jsonl(tmp_path):
    rows = [{"step": 1, **SILENT, "time/rollout": 60.0, "time/update": 30.0, "reward/a/seconds": 6.0},
            {"step": 2, "zero_variance_fraction": 0.25, "update/skipped": 0.0, "time/rollout": 90.0,
             "time/update": 60.0, "time/logprobs": 60.0, "reward/a/seconds": 6.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    totals = run_totals(tmp_path)
    assert totals == {"skipped_updates": 1, "no_signal_steps": 1,
                      "time": {"rollout": 150.0, "logprobs": 60.0, "update": 90.0, "scoring": 12.0}}
    assert time_line(totals["time"]) == ("time: rollout 2.5 min (50%; scoring 0.2 min), log-probs 1.0 min (20%), "
                                         "update 1.5 min (30%); 5.0 min of steps")


def test_a_run_whose_rewards_are_always_zero_says_so_and_counts_its_skipped_updates(tmp_path, capsys):
    zero = f"rewards=[{{name: '{REWARD_FNS}:always_zero'}}]"
    config = tiny_config(tmp_path, zero, "eval_before=false", "eval_after=false", steps=3)
    summary = train_grpo(config)
    err = capsys.readouterr().err
    assert err.count("rlvr: no learning signal for 3 steps in a row") == 1
    assert "signal=0/" in err  # the bar: groups with a signal / groups
    assert summary["skipped_updates"] == 3 and summary["no_signal_steps"] == 3
    assert set(summary["time"]) >= {"rollout", "update"} and all(v >= 0 for v in summary["time"].values())
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["skipped_updates"] == 3


def test_the_learning_rate_schedule_spans_every_update_when_a_batch_takes_several(tmp_path):
    """μ = 2 updates a step over 4 steps: a linear decay spans the 8 optimizer steps, so no step trains at lr 0
    (sized for 4, it reached 0 halfway and the last two steps learned nothing)."""
    config = tiny_config(tmp_path, f"rewards=[{{name: '{REWARD_FNS}:digit_share'}}]", "eval_before=false",
                         "eval_after=false", "algorithm.updates_per_batch=2", "optim.schedule=linear",
                         "optim.lr=8e-6", steps=4)
    train_grpo(config)
    lrs = [json.loads(line)["lr"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(a > b for a, b in itertools.pairwise(lrs)) and lrs[-1] > 0, lrs
