"""TRL-style scripts (tests/trl/scripts) run on rlvr after changing only their import line: each is run as it
is, with `from rlvr.trl import ...`, on the tiny model; where TRL is installed, the same script with
`from trl import ...` runs on TRL too, so they are TRL's API and nothing else. The vLLM one runs in
tests/samplers/test_trl_vllm.py (vLLM's venv)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SCRIPTS = Path(__file__).with_name("scripts")
IMPORT = "from rlvr.trl import GRPOConfig, GRPOTrainer"
CPU_SCRIPTS = ["quickstart", "open_r1", "lora", "weights", "habits"]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """The tiny model as a transformers folder, which rlvr and TRL both load by path."""
    from rlvr.models import build_tiny_model

    folder = tmp_path_factory.mktemp("tiny")
    model, tokenizer = build_tiny_model(0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def run(script: Path, model: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MODEL": str(model), "OUTPUT_DIR": str(out), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600,
                          cwd=out.parent)


@pytest.mark.parametrize("name", [*CPU_SCRIPTS, "vllm_backed"])
def test_a_script_differs_from_trl_only_in_its_import_line(name):
    lines = (SCRIPTS / f"{name}.py").read_text().splitlines()
    assert [line for line in lines if "rlvr" in line] == [IMPORT]


@pytest.mark.parametrize("name", CPU_SCRIPTS)
def test_the_script_trains_on_rlvr(name, tiny_folder, tmp_path):
    out = tmp_path / name
    done = run(SCRIPTS / f"{name}.py", tiny_folder, out)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    config = yaml.safe_load((out / "config.yaml").read_text())
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2] and config["model"]["name"] == str(tiny_folder)
    CHECKS[name](out, config, done)


def check_quickstart(out, config, done):
    """TRL's defaults where the script gives none; text prompts asked as they are (TRL's standard form)."""
    assert config["optim"]["lr"] == 1e-6 and config["algorithm"]["beta"] == 0.0 and config["seed"] == 42
    assert config["algorithm"]["loss_aggregation"] == "token_mean" and config["data"]["template"] == "plain"


def check_open_r1(out, config, done):
    """Both rewards ran unchanged; the first listed, accuracy, is the correctness reward; the model was saved."""
    from transformers import AutoModelForCausalLM

    assert [(r["name"].split(":")[-1], r["correctness"]) for r in config["rewards"]] == [
        ("accuracy_reward", True), ("format_reward", False)]
    assert config["data"]["template"] == "chat" and config["optim"]["lr"] == 1e-5
    AutoModelForCausalLM.from_pretrained(out / "model")


def check_lora(out, config, done):
    """peft_config became model.lora, and the saved adapters load with peft onto the base."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    assert config["model"]["lora"] == {"rank": 8, "alpha": 16.0, "dropout": 0.0, "target_modules": ["all-linear"]}
    base = AutoModelForCausalLM.from_pretrained(config["model"]["name"])
    PeftModel.from_pretrained(base, out / "adapters")


def check_weights(out, config, done):
    assert [r["weight"] for r in config["rewards"]] == [1.0, 0.5]
    assert config["algorithm"]["advantage_scale"] == "batch_std" and config["algorithm"]["beta"] == 0.04
    assert config["algorithm"]["loss_aggregation"] == "sequence_mean" and config["sampling"]["batch_size"] == 8


def check_habits(out, config, done):
    """Run twice into one output_dir: the second started afresh (metrics.jsonl holds its 2 steps, not 4) and said
    so; train() gave TRL's TrainOutput; save_model wrote into the folder the first run's save left."""
    import json

    from transformers import AutoModelForCausalLM

    assert done.stderr.count("holds an earlier run: starting afresh over it") == 1, done.stderr[-2000:]
    outputs = json.loads((out.parent / f"{out.name}.train_outputs.json").read_text())
    assert [o["global_step"] for o in outputs] == [2, 2]
    assert all(isinstance(o["training_loss"], float) and o["metrics"]["train_runtime"] > 0 for o in outputs)
    losses = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert outputs[1]["training_loss"] == pytest.approx(sum(losses) / len(losses))
    AutoModelForCausalLM.from_pretrained(out / "final")


CHECKS = {"quickstart": check_quickstart, "open_r1": check_open_r1, "lora": check_lora, "weights": check_weights,
          "habits": check_habits}


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="TRL is not installed (pip install trl)")
@pytest.mark.parametrize("name", CPU_SCRIPTS)
def test_the_same_script_with_trls_import_trains_on_trl(name, tiny_folder, tmp_path):
    script = tmp_path / f"{name}.py"
    script.write_text((SCRIPTS / f"{name}.py").read_text().replace(IMPORT, "from trl import GRPOConfig, GRPOTrainer"))
    done = run(script, tiny_folder, tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
