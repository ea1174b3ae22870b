"""train_sft: the model learns, the run directory is complete and loadable, resume is exact, Ctrl-C is safe."""

import json
import os
import signal
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import SFTConfig, TrainConfig
from rlvr.errors import UserError
from rlvr.models import load_model, resolve_model_path
from rlvr.run.directory import resume_config
from rlvr.sft.train import train_sft

from .conftest import echo_rows, tiny_sft_config, write_rows


@pytest.fixture(scope="module")
def trained(tmp_path_factory, echo_file):
    """(config, summary) of 30 steps on the echo rows, held-out loss every 10, checkpoints every 10."""
    config = tiny_sft_config(echo_file, tmp_path_factory.mktemp("sft") / "run", max_steps=30, eval_every=10,
                             save_every=10)
    return config, train_sft(config)


def metrics_of(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def weights(run_dir):
    return load_file(paths.latest_checkpoint(Path(run_dir)) / "model" / "model.safetensors")


def test_sft_lowers_the_held_out_loss_markedly(trained):
    _, summary = trained
    before, after = summary["before"], summary["after"]
    assert summary["train_examples"] == 30 and summary["held_out_examples"] == 10 and summary["steps"] == 30
    assert before["tokens"] == after["tokens"] > 0
    assert before["loss"] > 4.0  # a random model over ~100 characters
    assert after["loss"] < 0.4 * before["loss"]


def test_run_directory(trained):
    config, summary = trained
    run = Path(config.output_dir)
    metrics = metrics_of(run)
    assert [m["step"] for m in metrics] == list(range(1, 31))
    assert {"loss", "lr", "grad_norm", "tokens", "completion_tokens", "tokens_per_second"} <= set(metrics[0])
    assert [m["step"] for m in metrics if "eval_loss" in m] == [10, 20, 30]
    assert metrics[-1]["eval_loss"] == pytest.approx(summary["after"]["loss"])
    assert metrics[-1]["loss"] < metrics[0]["loss"]
    assert json.loads((run / "summary.json").read_text()) == json.loads(json.dumps(summary))
    assert "model:\n  name: tiny\n" in (run / "config.yaml").read_text()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000020", "step-000030"]


def test_the_run_directory_loads_as_a_model(trained):
    config, _ = trained
    run = Path(config.output_dir)
    assert Path(resolve_model_path(str(run))) == run / "checkpoints" / "step-000030" / "model"
    model, tokenizer = load_model(str(run))  # what rlvr train --set model.name=RUN and rlvr eval --model RUN do
    saved = weights(run)
    assert all(torch.equal(saved[name], tensor) for name, tensor in model.state_dict().items() if name in saved)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "echo abc"}], tokenize=False,
                                           add_generation_prompt=True)
    ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids
    assert model.generate(ids, max_new_tokens=4, do_sample=False).shape[1] > ids.shape[1]


def test_resumed_run_ends_with_the_same_weights_as_an_unbroken_one(make_config):
    changes = dict(max_steps=6, packing=True, max_length=64,
                   optim={"micro_batch_tokens": 64, "warmup_steps": 2, "schedule": "cosine"})
    unbroken = train_sft(make_config("unbroken", **changes))
    config = make_config("broken", **changes)
    stopped = train_sft(config, on_step_end=lambda step, metrics, flag: flag.request_stop() if step == 3 else None)
    # unfinished: no summary yet
    assert stopped["stopped_at"] == 3 and not (Path(config.output_dir) / "summary.json").exists()
    resumed = train_sft(resume_config(SFTConfig, Path(config.output_dir)), resume=True)
    assert resumed["steps"] == 6 and resumed["resumed_from_step"] == 3
    a, b = weights(unbroken["run_dir"]), weights(config.output_dir)
    # bitwise: same batches, same optimizer state, same order of sums
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert [m["loss"] for m in metrics_of(config.output_dir)] == [m["loss"] for m in metrics_of(unbroken["run_dir"])]
    assert resumed["before"] == unbroken["before"]  # measured once, when the run started


def test_a_run_resumed_with_more_steps_goes_on_along_the_longer_schedule(make_config):
    """A linear decay over 2 steps ends at 0: resumed to 4, steps 3 and 4 train at the 4-step schedule's rates
    (they trained step 3 at 0 before), for SFT and GRPO alike (rlvr.optim.load_schedule)."""
    from rlvr.grpo.trainer import train_grpo

    from ..train.test_step import DIGITS, tiny_config

    unbroken = train_sft(make_config("unbroken", max_steps=4))
    config = make_config("extended", max_steps=2)
    train_sft(config)
    train_sft(resume_config(SFTConfig, Path(config.output_dir), max_steps=4), resume=True)
    rates = [[m["lr"] for m in metrics_of(run)] for run in (config.output_dir, unbroken["run_dir"])]
    assert rates[0][2:] == rates[1][2:] and rates[0][2] > 0
    for name, steps in (("grpo-2", 2), ("grpo-4", 4)):  # (GRPO's default schedule decays too, past its warm-up)
        train_grpo(tiny_config(Path(config.output_dir).parent / name, DIGITS, "eval_before=false", "eval_after=false",
                               "optim.schedule=linear", "optim.warmup_steps=0", steps=steps))
    grpo = Path(config.output_dir).parent / "grpo-2" / "run"
    train_grpo(resume_config(TrainConfig, grpo, max_steps=4), resume=True)
    rates = [[m["lr"] for m in metrics_of(run)] for run in (grpo, grpo.parent.parent / "grpo-4" / "run")]
    assert rates[0][2:] == rates[1][2:] and rates[0][2] > 0


def test_ctrl_c_finishes_the_step_saves_and_returns(make_config):
    config = make_config(max_steps=5)
    summary = train_sft(config, on_step_end=lambda step, metrics, flag: (
        os.kill(os.getpid(), signal.SIGINT) if step == 2 else None))
    assert summary["stopped_at"] == 2
    assert paths.latest_checkpoint(Path(config.output_dir)).name == "step-000002"


def test_interrupt_keeps_the_last_checkpoint_loadable_and_resumable(make_config):
    config = make_config(max_steps=6, save_every=2)

    def abort_at_step_3(step, metrics, flag):
        if step == 3:
            raise KeyboardInterrupt  # a second Ctrl-C: no saving, the last checkpoint must stay whole

    with pytest.raises(KeyboardInterrupt):
        train_sft(config, on_step_end=abort_at_step_3)
    run = Path(config.output_dir)
    assert paths.latest_checkpoint(run).name == "step-000002"
    assert not (run / "summary.json").exists()
    model, _ = load_model(str(run))
    assert all(torch.equal(weights(run)[n], t) for n, t in model.state_dict().items() if n in weights(run))
    summary = train_sft(resume_config(SFTConfig, run), resume=True)
    assert summary["steps"] == 6
    assert [m["step"] for m in metrics_of(run)] == [1, 2, 3, 4, 5, 6]  # step 3 of the aborted session is not kept twice


def test_existing_run_is_not_overwritten_and_resume_needs_a_checkpoint(trained, make_config):
    config, _ = trained
    with pytest.raises(UserError, match="already holds a run: continue it with --resume"):
        train_sft(config)
    with pytest.raises(UserError, match="no complete checkpoint"):
        resume_config(SFTConfig, Path(make_config().output_dir))


def test_a_run_of_another_command_is_named_at_resume(trained):
    """An SFT run given to `rlvr train --resume` (or `rlvr rm --resume`) is one line naming the command that made
    it, not its first setting GRPO does not know."""
    from rlvr.config import RewardModelConfig, TrainConfig

    config, _ = trained
    for cls in (TrainConfig, RewardModelConfig):
        with pytest.raises(UserError, match=r"it is a run of `rlvr sft`; continue it with rlvr sft --resume"):
            resume_config(cls, Path(config.output_dir))
    from rlvr.config import load_config
    from rlvr.grpo.trainer import train_grpo

    fresh = load_config(None, ["model.name=tiny", f"output_dir={config.output_dir}"])  # a new GRPO run there
    with pytest.raises(UserError, match=r"already holds a run of `rlvr sft` \(`rlvr sft --resume .*` continues it\): "
                                        r"pick another --output-dir, or start afresh over it with --overwrite$"):
        train_grpo(fresh)


def test_resume_with_other_data_is_refused(trained, tmp_path):
    config, _ = trained
    other = write_rows(tmp_path / "other.jsonl", echo_rows(n=20, seed=1))
    with pytest.raises(UserError, match="resume with the same data"):
        train_sft(resume_config(SFTConfig, Path(config.output_dir), [f"data={other}", "max_steps=40"]), resume=True)
    edited = write_rows(tmp_path / "edited.jsonl", echo_rows(n=40, seed=1))  # (as many rows as the run's: others)
    with pytest.raises(UserError, match="the data gives 30 rows as the run's did, but not the same ones"):
        train_sft(resume_config(SFTConfig, Path(config.output_dir), [f"data={edited}", "max_steps=40"]), resume=True)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"data": ""}, "give --data"),
        ({"eval_fraction": 1.0}, "eval_fraction"),
        ({"batch_size": 0}, "batch_size"),
        ({"max_length": 1}, "max_length"),
        ({"optim": {"lr": 0.0}}, "optim.lr must be positive"),
        ({"max_steps": -1}, "max_steps"),
    ],
)
def test_bad_settings_are_one_line_errors(make_config, changes, message):
    with pytest.raises(UserError, match=message) as error:
        make_config(**changes).validate()  # checked as it is built, and again here
    assert "\n" not in str(error.value)
