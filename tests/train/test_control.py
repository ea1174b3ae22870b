"""Control runs (rlvr.rewards.control): coins at the stated rate, the format rewards alone, the run's own seeds and
data order, and `rlvr compare` pairing a run with its control."""

import json
import math
import re
import subprocess
import sys

import pytest
import torch

from rlvr.errors import UserError
from rlvr.evaluate.compare import compare_runs, describe
from rlvr.grpo.trainer import Trainer
from rlvr.records import Example, Rollout, ScoredRollout
from rlvr.rewards.control import check_control, coin_rewards, controlled

from .test_step import REWARD_FNS, tiny_config

SHARE = f"rewards=[{{name: '{REWARD_FNS}:digit_share', correctness: true}}, {{name: boxed_format, weight: 0.1}}]"
nan = math.nan


def test_a_coin_lands_high_at_the_groups_rate():
    """Over uniforms spread evenly on [0, 1), the coin lands on the group's highest value exactly at the rate
    (mean − lowest) / (highest − lowest): a 0/1 reward's pass rate; a NaN stays NaN and is left out of the rate."""
    u = (torch.arange(1000, dtype=torch.float32) + 0.5) / 1000
    for values, rate in (([1, 0, 0, 0], 0.25), ([1, 1, 1, 0], 0.75), ([0.5, 1, 1, 1], 0.75), ([1, nan, 0, 0], 1 / 3),
                         ([2, 2, 2, 2], 1.0), ([0, 0, 0, 0], 1.0)):  # (one value: its lowest is its highest)
        group = torch.tensor(values, dtype=torch.float32).repeat(250, 1)  # [250, 4]: 1000 coins
        coins = coin_rewards(group, u.view(250, 4))
        scored = ~group.isnan()
        high = group.nan_to_num(-1).amax(dim=1, keepdim=True)
        assert torch.equal(coins.isnan(), ~scored)
        landed = (coins[scored] == high.expand_as(group)[scored]).float().mean()
        assert abs(float(landed) - rate) < 2e-3, (values, float(landed))
        low = group.nan_to_num(99).amin(dim=1, keepdim=True).expand_as(group)
        assert bool(((coins[scored] == high.expand_as(group)[scored]) | (coins[scored] == low[scored])).all())


def _scored(rewards: dict[str, list[list[float]]], index0: int = 0) -> ScoredRollout:
    p, g = len(next(iter(rewards.values()))), len(next(iter(rewards.values()))[0])
    rollout = Rollout(examples=[Example("q", index=index0 + i) for i in range(p)], group_size=g,
                      prompt_ids=torch.zeros(p, 1, dtype=torch.long), prompt_mask=torch.ones(p, 1, dtype=torch.bool),
                      completion_ids=torch.zeros(p * g, 1, dtype=torch.long),
                      completion_mask=torch.ones(p * g, 1, dtype=torch.bool), sampling_logprobs=torch.zeros(p * g, 1),
                      truncated=torch.zeros(p * g, dtype=torch.bool), completions=[""] * (p * g))
    parts = {k: torch.tensor(v) for k, v in rewards.items()}
    total = sum(w * v.nan_to_num(0) for w, v in zip((1.0, 0.1), parts.values()))
    unscored = torch.stack(list(parts.values())).isnan().all(dim=0)
    return ScoredRollout(rollout, total.masked_fill(unscored, nan), parts, {k: 0.0 for k in parts})


def test_random_control_replaces_every_reward_and_recomputes_the_total():
    rates = [[1.0] * 3 + [0.0] * 5] * 400  # 400 groups of 8 at a pass rate of 3/8
    scored = _scored({"acc": rates, "boxed_format": [[0.0] * 4 + [1.0] * 4] * 400})
    weights = {"acc": 1.0, "boxed_format": 0.1}
    made_up = controlled(scored, "random", weights, seed=0, step=1)
    assert abs(float(made_up.reward_components["acc"].mean()) - 3 / 8) < 0.02  # the stated rate, over 3,200 coins
    assert abs(float(made_up.reward_components["boxed_format"].mean()) - 0.5) < 0.02
    assert not torch.equal(made_up.reward_components["acc"], scored.reward_components["acc"])
    acc, boxed = made_up.reward_components["acc"], made_up.reward_components["boxed_format"]
    assert torch.allclose(made_up.rewards, acc + 0.1 * boxed)
    # the two rewards draw apart; a run and its rerun draw the same coins, another step others
    assert abs(float(((acc == 1) & (boxed == 0)).float().mean()) - 3 / 16) < 0.02  # independent coins
    again = controlled(scored, "random", weights, seed=0, step=1)
    assert torch.equal(again.rewards, made_up.rewards)
    assert not torch.equal(controlled(scored, "random", weights, seed=0, step=2).rewards, made_up.rewards)
    assert not torch.equal(controlled(scored, "random", weights, seed=1, step=1).rewards, made_up.rewards)
    assert controlled(scored, "none", weights, seed=0, step=1) is scored


def test_unscored_completions_stay_unscored():
    scored = _scored({"acc": [[1.0, nan, 0.0, 0.0]], "boxed_format": [[1.0, nan, 1.0, 0.0]]})
    for control in ("random", "format"):
        made_up = controlled(scored, control, {"acc": 1.0, "boxed_format": 0.1}, seed=0, step=1)
        assert made_up.rewards.isnan().tolist() == [[False, True, False, False]]


def test_format_control_keeps_the_format_rewards_alone():
    scored = _scored({"acc": [[1.0, 0.0, 1.0, 0.0]], "boxed_format": [[1.0, 1.0, 0.0, 0.0]]})
    made_up = controlled(scored, "format", {"acc": 1.0, "boxed_format": 0.1}, seed=0, step=1)
    assert made_up.reward_components["acc"].tolist() == [[0.0] * 4]
    assert made_up.reward_components["boxed_format"].tolist() == [[1.0, 1.0, 0.0, 0.0]]
    assert torch.allclose(made_up.rewards, torch.tensor([[0.1, 0.1, 0.0, 0.0]]))
    with pytest.raises(UserError, match="control=format keeps the format rewards alone.*has none.*boxed_format"):
        check_control("format", ["math_accuracy"])
    check_control("random", ["math_accuracy"])


def test_a_control_trains_on_coins_with_the_runs_own_samples_and_data_order(tmp_path):
    """Step for step, the control samples the prompts the run samples, the same completions at step 1 (same
    seeds, same weights), logs the verifiers' rewards, and trains on coins drawn from each group's own values."""
    runs = {}
    for control in ("none", "random", "format"):
        trainer = Trainer(tiny_config(tmp_path / control, SHARE, f"control={control}", steps=3))
        seen, real_rewarded = [], trainer.rewarded

        def spy(scored, seen=seen, real=real_rewarded):
            trained = real(scored)
            seen.append((scored, trained))
            return trained

        trainer.rewarded = spy
        metrics = [trainer.step().metrics for _ in range(3)]
        runs[control] = (seen, metrics)
    (real, real_metrics), (ctrl, ctrl_metrics) = runs["none"], runs["random"]
    for (a, _), (b, _) in zip(real, ctrl):
        assert [e.index for e in a.rollout.examples] == [e.index for e in b.rollout.examples]  # the data order
    assert real[0][0].rollout.completions == ctrl[0][0].rollout.completions  # step 1: same seeds, same weights
    assert torch.equal(real[0][0].rewards, ctrl[0][0].rewards)
    assert real_metrics[0]["accuracy"] == ctrl_metrics[0]["accuracy"]  # what is logged: the verifiers' rewards
    assert "control/reward/mean" in ctrl_metrics[0] and "control/reward/mean" not in real_metrics[0]
    for scored, trained in ctrl:
        assert trained is not scored
        for name, v in scored.reward_components.items():
            c = trained.reward_components[name]
            low, high = v.amin(dim=1, keepdim=True), v.amax(dim=1, keepdim=True)
            assert bool(((c == low) | (c == high)).all())  # each coin lands on a value its own group had
    assert any(not torch.equal(s.rewards, t.rewards) for s, t in ctrl)
    assert all(t is s for s, t in real)
    formats, format_metrics = runs["format"]  # the format reward alone: the same samples, trained on boxed_format
    assert [e.index for s, _ in formats for e in s.rollout.examples] == [e.index for s, _ in real
                                                                        for e in s.rollout.examples]
    for scored, trained in formats:
        name = next(n for n in scored.reward_components if n.endswith("digit_share"))
        assert bool((trained.reward_components[name] == 0).all())
        assert torch.equal(trained.reward_components["boxed_format"], scored.reward_components["boxed_format"])
        assert torch.allclose(trained.rewards, 0.1 * scored.reward_components["boxed_format"])
    assert format_metrics[0]["accuracy"] == real_metrics[0]["accuracy"]


def test_rlvr_compare_pairs_a_run_with_its_control(tmp_path):
    """Both runs through the CLI (the control with --control random): the control's summary says what it trained
    on, heldout.json holds each problem's verdicts, and `rlvr compare` pairs them and names what else differs."""
    base = [sys.executable, "-m", "rlvr", "train", "--set", "model.name=tiny", "--set", "data.train_size=32",
            "--set", "data.eval_size=6", "--set", "sampling.group_size=4", "--set", "sampling.batch_size=8",
            "--set", "generation.max_new_tokens=8", "--set", "sample_every=0", "--set", SHARE, "--max-steps", "2",
            "--set", "threads=1"]
    run, control, other = tmp_path / "run", tmp_path / "control", tmp_path / "other"
    for args in ([*base, "--output-dir", str(run)], [*base, "--output-dir", str(control), "--control", "random"],
                 [*base, "--output-dir", str(other), "--control", "random", "--set", "seed=1",
                  "--set", "data.eval_size=5"]):
        subprocess.run(args, check=True, capture_output=True, timeout=300)
    summary = json.loads((control / "summary.json").read_text())
    assert summary["control"]["kind"] == "random" and "coin" in summary["control"]["trained_on"]
    assert "control" not in json.loads((run / "summary.json").read_text())
    held = json.loads((run / "heldout.json").read_text())
    assert len(held["rows"]) == 6 and len(held["after"]["strict"]) == 6 and set(held["after"]["strict"]) <= {0, 1}
    assert held["problems"] == json.loads((control / "heldout.json").read_text())["problems"]
    result = compare_runs(run, control)
    assert result["n"] == 6 and result["differs"] == {} and result["control"]["kind"] == "random"
    strict, gain = result["strict"], result["strict"]["gain_over_control"]
    assert gain["mean"] == pytest.approx(strict["run"]["mean"] - strict["control"]["mean"])
    assert gain["low"] <= gain["mean"] <= gain["high"]
    text = describe(result, run, control)
    assert "gain over the control" in text and "coin" in text and "not like for like" not in text
    printed = subprocess.run([sys.executable, "-m", "rlvr", "compare", str(run), str(control)], capture_output=True,
                             text=True, timeout=60)
    assert printed.returncode == 0 and "gain over the control" in printed.stdout
    with pytest.raises(UserError, match="different held-out problems"):
        compare_runs(run, other)
    with pytest.raises(UserError, match=rf"{control} is a control run and {run} is not: the control comes second, "
                                        rf"rlvr compare {run} {control}$"):
        compare_runs(control, run)  # (the gain's sign turned round)
    refused = subprocess.run([sys.executable, "-m", "rlvr", "compare", str(run), str(tmp_path / "nowhere")],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "is not a run directory" in refused.stderr and "Traceback" not in refused.stderr


def test_compare_names_what_else_differs(tmp_path):
    for name, seed in (("a", 0), ("b", 1)):
        d = tmp_path / name
        d.mkdir()
        (d / "config.yaml").write_text(f"seed: {seed}\ncontrol: {'none' if name == 'a' else 'random'}\n"
                                       f"output_dir: {d}\nmodel: {{name: tiny}}\n")
        (d / "heldout.json").write_text(json.dumps({"rows": [0, 1], "before": None,
                                                    "after": {"strict": [1, 0], "lenient": [1, 1]}}))
    result = compare_runs(tmp_path / "a", tmp_path / "b")
    assert result["differs"] == {"seed": [0, 1]}
    assert "not like for like: the configs also differ in seed (0 vs 1)" in describe(result, tmp_path / "a",
                                                                                   tmp_path / "b")
    for name, problems in (("a", "0123456789abcdef"), ("b", "fedcba9876543210")):  # other prompts, the same rows
        held = json.loads((tmp_path / name / "heldout.json").read_text())
        (tmp_path / name / "heldout.json").write_text(json.dumps({**held, "problems": problems}))
    with pytest.raises(UserError, match="were evaluated on different held-out problems"):
        compare_runs(tmp_path / "a", tmp_path / "b")


def test_compare_says_why_a_folder_has_no_verdicts_and_the_fix_that_works(tmp_path):
    """An empty folder is no run; an unfinished run is finished by --resume; a run that finished with eval_after
    false is evaluated by --resume with eval_after=true (a plain --resume would train and evaluate nothing)."""
    empty, unfinished, finished = (tmp_path / name for name in ("empty", "unfinished", "finished"))
    for d in (empty, unfinished, finished):
        d.mkdir()
    for d in (unfinished, finished):
        (d / "config.yaml").write_text("eval_after: false\nmodel: {name: tiny}\n")
    (finished / "summary.json").write_text(json.dumps({"steps": 1, "heldout_skipped": "eval_after is false"}))
    for run, said in ((empty, "is not a run directory"), (unfinished, "the run has not finished; finish it with rlvr "
                                                                      f"train --resume {unfinished}"),
                      (finished, f"finished without an evaluation after training (eval_after: false): rlvr train "
                                 f"--resume {finished} --set eval_after=true evaluates it")):
        with pytest.raises(UserError, match=re.escape(said)):
            compare_runs(run, tmp_path)
