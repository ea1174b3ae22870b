"""Training a reward model: learnable preferences are learned, the run directory is complete, Ctrl-C is safe."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import RewardModelConfig
from rlvr.errors import UserError
from rlvr.models.reward_model import STATS_FILE
from rlvr.reward_models.train import train_reward_model
from rlvr.rewards.reward_model import RewardModelScorer
from rlvr.run.directory import resume_config

from .conftest import tiny_rm_config


def test_held_out_pairwise_accuracy_rises_well_above_chance(trained):
    _, summary = trained
    before, after = summary["before"]["pairwise_accuracy"], summary["after"]["pairwise_accuracy"]
    assert summary["held_out_pairs"] == 16 and summary["train_pairs"] == 48
    assert before["low"] < 0.5 < before["high"]  # the random head ranks at chance
    assert after["mean"] >= 0.9 and after["low"] > 0.6  # the whole 95% interval is far above chance
    assert summary["after"]["margin"] > summary["before"]["margin"] + 1.0


def test_run_directory(trained):
    config, summary = trained
    run = Path(config.output_dir)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 16))
    assert all(0.0 <= m["accuracy"] <= 1.0 and m["loss"] > 0 for m in metrics)
    assert metrics[-1]["loss"] < metrics[0]["loss"]
    assert "model:\n  name: tiny\n" in (run / "config.yaml").read_text()
    assert json.loads((run / "summary.json").read_text()) == json.loads(json.dumps(summary))
    # checkpoints every 5 steps, the newest two kept, each with its own statistics
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000010", "step-000015"]
    stats = json.loads((run / "checkpoints" / "step-000015" / "model" / STATS_FILE).read_text())
    assert stats == summary["score_stats"] and stats["count"] == 96  # every training completion
    assert (run / "checkpoints" / "step-000015" / "config.yaml").is_file()


def test_checkpoint_round_trip_gives_identical_scores(trained, tmp_path):
    config, _ = trained
    from rlvr.models.reward_model import load_reward_model

    path = paths.latest_checkpoint(Path(config.output_dir)) / "model"
    scorer = RewardModelScorer.from_path(path, device="cpu")
    prompts, completions = ["say abc", "say abc"], ["hello!", "hello"]
    model, tokenizer = load_reward_model(str(path))  # the same files through the training loader
    reloaded = RewardModelScorer(model, tokenizer, scorer.stats)
    assert scorer.score(prompts, completions) == reloaded.score(prompts, completions)
    model.save_pretrained(tmp_path / "again")
    tokenizer.save_pretrained(tmp_path / "again")
    (tmp_path / "again" / STATS_FILE).write_text((path / STATS_FILE).read_text())
    assert (RewardModelScorer.from_path(tmp_path / "again", device="cpu").score(prompts, completions)
            == scorer.score(prompts, completions))


def test_stop_request_finishes_the_step_and_saves(make_config):
    config = make_config(max_steps=6)
    summary = train_reward_model(config,
                                 on_step_end=lambda step, metrics, flag: flag.request_stop() if step == 2 else None)
    assert summary["stopped_at"] == 2
    assert paths.latest_checkpoint(Path(config.output_dir)).name == "step-000002"


def test_resumed_run_ends_with_the_same_weights_as_an_unbroken_one(pairs_file, tmp_path):
    """Reward-model training resumes like every recipe: same batches, optimizer state and RNG, so the same weights."""
    changes = dict(max_steps=6, optim={"warmup_steps": 2, "schedule": "cosine"})
    unbroken = train_reward_model(tiny_rm_config(pairs_file, tmp_path / "unbroken", **changes))
    config = tiny_rm_config(pairs_file, tmp_path / "broken", **changes)
    stopped = train_reward_model(config, on_step_end=lambda step, m, flag: flag.request_stop() if step == 3 else None)
    assert stopped["stopped_at"] == 3
    resumed = train_reward_model(resume_config(RewardModelConfig, Path(config.output_dir)), resume=True)
    assert resumed["steps"] == 6 and resumed["before"] == unbroken["before"]
    a, b = (load_file(paths.latest_checkpoint(Path(d)) / "model" / "model.safetensors")
            for d in (unbroken["run_dir"], config.output_dir))
    assert all(torch.equal(a[name], b[name]) for name in a)
    losses = [[json.loads(line)["loss"] for line in (Path(d) / "metrics.jsonl").read_text().splitlines()]
              for d in (unbroken["run_dir"], config.output_dir)]
    assert losses[0] == losses[1] and len(losses[0]) == 6
    assert resumed["score_stats"] == unbroken["score_stats"]


def test_interrupt_while_saving_keeps_the_last_checkpoint_whole(make_config, monkeypatch):
    config = make_config(max_steps=4, save_every=2)
    real_save, calls = torch.save, []

    def save_then_interrupt(obj, f, *args, **kwargs):
        calls.append(f)
        if len(calls) == 2:  # the second checkpoint: weights written, trainer.pt not yet
            raise KeyboardInterrupt
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        train_reward_model(config)
    run = Path(config.output_dir)
    assert [p.name for p in (run / "checkpoints").iterdir() if not p.name.startswith(".")] == ["step-000002"]
    assert paths.latest_checkpoint(run).name == "step-000002"
    monkeypatch.undo()
    assert len(RewardModelScorer.from_path(run).score(["say a"], ["b!"])) == 1  # loads whole


def test_existing_run_is_not_overwritten(trained):
    config, _ = trained
    with pytest.raises(UserError, match="already holds a run: continue it with --resume"):
        train_reward_model(config)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"data": ""}, "give --data"),
        ({"eval_fraction": 1.0}, "eval_fraction"),
        ({"batch_size": 0}, "batch_size"),
        ({"lr": 0.0}, "lr must be positive"),
        ({"max_steps": -1}, "max_steps"),
    ],
)
def test_bad_settings_are_one_line_errors(make_config, changes, message):
    with pytest.raises(UserError, match=message) as error:
        make_config(**changes).validate()  # checked as it is built, and again here
    assert "\n" not in str(error.value)


def test_the_run_section_applies_as_for_every_command(pairs_file, tmp_path):
    """eval_every and keep_checkpoints (the run section every training command has: rlvr.config.run) reach the
    reward model's loop: its held-out accuracy logged every 2 steps, one checkpoint kept."""
    config = tiny_rm_config(pairs_file, tmp_path / "run", max_steps=4, eval_every=2, save_every=2, keep_checkpoints=1)
    train_reward_model(config)
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "eval/pairwise_accuracy" in m] == [2, 4]
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["step-000004"]
