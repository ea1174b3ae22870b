"""What a checkpoint fixes cannot be overridden at `--resume`: the adapters (model.lora), and the steps
already trained (a max_steps below them). Refused with one line, before the model loads where the
config alone tells, the run left as it was."""

import json
import shutil

import pytest

from rlvr.cli import main
from rlvr.config import SFTConfig, config_from_dict
from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo
from rlvr.sft.train import train_sft

from .test_step import DIGITS, tiny_config

QUIET = ["eval_before=false", "eval_after=false"]


def sft_config(tmp_path, **settings):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"echo {w}", "completion": f"{w}!"}) + "\n" for w in "abcdefgh"))
    return config_from_dict(SFTConfig, {"model": "tiny", "data": str(data), "batch_size": 2, "eval_fraction": 0.25,
                                        "output_dir": str(tmp_path / "sft"), "threads": 1, **settings})


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """Finished runs, full (2 steps) and LoRA (rank 4, 1 step), each with its checkpoint; tests resume copies."""
    root = tmp_path_factory.mktemp("runs")
    train_grpo(tiny_config(root / "full", DIGITS, *QUIET, steps=2))
    train_grpo(tiny_config(root / "lora", DIGITS, *QUIET, "model.lora.rank=4", "algorithm.beta=0", steps=1))
    return root


@pytest.fixture
def copy_of(finished, tmp_path):
    def copy(kind):
        shutil.copytree(finished / kind / "run", tmp_path / kind)
        return tmp_path / kind
    return copy


def steps_logged(run):
    return [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def refused(args, capsys):
    """The one line `rlvr ARGS` ends with, after checking that it is one line and that no model was loaded."""
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.fixture
def no_model_loads(monkeypatch):
    monkeypatch.setattr("rlvr.grpo.trainer.Trainer", lambda *args: pytest.fail("the model was loaded"))


def test_unchanged_adapter_settings_resume(copy_of, capsys):
    run = copy_of("lora")
    same = ["--set", "model.lora.rank=4", "--set", "model.lora.target_modules=[all-linear]"]
    assert main(["train", "--resume", str(run), *same, "--max-steps", "2"]) == 0
    assert steps_logged(run) == [1, 2]


@pytest.mark.parametrize("kind, change, said", [
    ("lora", "model.lora.rank=16", "model.lora.rank=16 (the run's is 4)"),
    ("lora", "model.lora.alpha=8", "model.lora.alpha=8.0 (the run's is 32.0)"),
    ("lora", "model.lora.dropout=0.1", "model.lora.dropout=0.1 (the run's is 0.0)"),
    ("lora", "model.lora.target_modules=[q_proj]",
     "model.lora.target_modules=['q_proj'] (the run's is ['all-linear'])"),
    ("lora", "model.lora=null", "model.lora removed (the run trains adapters)"),
    ("full", "model.lora.rank=4", "model.lora (the run trains every weight, without adapters)"),
], ids=["rank", "alpha", "dropout", "target modules", "LoRA to none", "none to LoRA"])
def test_changed_adapter_settings_are_refused(copy_of, capsys, no_model_loads, kind, change, said):
    run = copy_of(kind)
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    line = refused(["train", "--resume", str(run), "--set", change, "--max-steps", "2"], capsys)
    assert line == (f"rlvr: error: cannot resume {run} with {said}: a run keeps the adapter settings it started "
                    f"with; start a new run from its model instead (--set model.name={run} --output-dir NEW_DIR)")
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


def test_every_training_command_refuses_other_adapters(tmp_path, capsys):
    config = sft_config(tmp_path, model={"name": "tiny", "lora": {}}, max_steps=1)
    train_sft(config)
    capsys.readouterr()
    line = refused(["sft", "--resume", config.output_dir, "--set", "model.lora.rank=2"], capsys)
    assert "with model.lora.rank=2 (the run's is 16)" in line


def test_another_model_is_refused_and_a_run_of_another_kind_named_from_python_too(tmp_path, capsys):
    """The weights come from the checkpoint: `--model` at resume was ignored while the run's records took the new
    name. From Python, another kind of run was an unknown config key of the other command's."""
    from rlvr import GRPO

    config = sft_config(tmp_path, max_steps=1)
    train_sft(config)
    capsys.readouterr()
    line = refused(["sft", "--resume", config.output_dir, "--model", "smollm2", "--max-steps", "2"], capsys)
    assert line == (f"rlvr: error: cannot resume {config.output_dir} with model 'smollm2': the run goes on from its "
                    "checkpoint's weights of 'tiny'; drop the model (or start a new run from this one: --model "
                    f"{config.output_dir} and a new --output-dir)")
    assert main(["sft", "--resume", config.output_dir, "--model", "tiny", "--max-steps", "2"]) == 0  # (the same)
    with pytest.raises(UserError, match=f"cannot resume {config.output_dir} with this command: it is a run of "
                                        "`rlvr sft`"):
        GRPO("tiny", rewards=["math_accuracy"], train_data="arithmetic", output_dir=config.output_dir,
             max_steps=3).train(resume=True)


def test_a_max_steps_below_the_step_reached_is_refused(copy_of, capsys, no_model_loads):
    run = copy_of("full")
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    line = refused(["train", "--resume", str(run), "--max-steps", "1"], capsys)
    assert line == (f"rlvr: error: cannot resume {run} to end at step 1: it is at step 2 already; give a --max-steps "
                    "above 2 (or none, to finish as configured)")
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


def test_fewer_epochs_than_trained_are_refused(tmp_path, capsys):
    """SFT's steps come from its epochs once the data is counted: the same refusal, after loading."""
    reached = train_sft(sft_config(tmp_path, epochs=2))["steps"]
    capsys.readouterr()
    line = refused(["sft", "--resume", str(tmp_path / "sft"), "--set", "epochs=1"], capsys)
    assert f"to end at step {reached // 2}: it is at step {reached} already" in line


def test_a_max_steps_at_the_step_reached_says_there_is_nothing_to_train(copy_of, capsys):
    run = copy_of("full")
    assert main(["train", "--resume", str(run), "--max-steps", "2"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rlvr")]
    assert lines == [f"rlvr: {run} is at its last step (2) already: nothing to train; give a --max-steps above 2 "
                     "to train further"]
    assert steps_logged(run) == [1, 2] and (run / "summary.json").is_file()
