"""Every script in examples/ runs as printed on the tiny model (so none rots), and leaves what it says it does."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SMALL = {"evaluate_your_verifier": ["--samples", "2"]}


def run(name, out):
    extra = SMALL.get(name, ["--max-steps", "2"])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--model", "tiny", "--output-dir", str(out),
                           *extra], capture_output=True, text=True, timeout=600, env=env, cwd=out.parent)


def test_every_example_is_tested():
    assert {p.stem for p in EXAMPLES.glob("*.py")} == set(CHECKS)


@pytest.mark.parametrize("name", sorted(["your_reward_and_data", "dataset_in_memory", "lora_then_transformers",
                                         "custom_environment", "evaluate_your_verifier", "ported_from_trl",
                                         "reasoning_gym_task", "agent_harness", "verifiers_environment",
                                         "openenv_environment", "feedback_agent", "cold_start_then_rl",
                                         "anthropic_agent", "mcp_tools", "openai_agents_sdk", "tinker_sdk"]))
def test_the_example_runs(name, tmp_path):
    out = tmp_path / "out"
    done = run(name, out)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    CHECKS[name](out, done.stdout)


def trained(out, steps=2):
    assert len((out / "metrics.jsonl").read_text().splitlines()) == steps
    return yaml.safe_load((out / "config.yaml").read_text())


def check_your_reward(out, printed):
    config = trained(out)
    assert config["rewards"][0]["name"] == "__main__:correct_sum" and (out / "inputs" / "code").is_dir()
    assert "pass@4:" in printed and (out / "eval" / "eval" / "summary.json").is_file()


def check_dataset(out, printed):
    config = trained(out)
    assert [r["correctness"] for r in config["rewards"]] == [True, False]
    assert len((out / "inputs" / "train.jsonl").read_text().splitlines()) == 64 - 16  # the split's train rows
    assert "held-out accuracy before:" in printed


def check_lora(out, printed):
    config = trained(out)
    assert config["model"]["lora"]["rank"] == 16
    assert (out.parent / "out-merged" / "config.json").is_file()


def check_environment(out, printed):
    trained(out)
    first = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert "env/turns" in first and "env/cut_before_reply" in first


def check_evaluation(out, printed):
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["verifiers"]["strict"] == "__main__:names_the_capital"
    assert summary["strict"]["problems"] == 8 and "pass@2" in printed


def check_trl(out, printed):
    config = trained(out)
    assert config["algorithm"]["beta"] == 0.04 and (out / "model" / "config.json").is_file()


def check_gym(out, printed):
    config = trained(out)
    assert config["data"]["train"] == "reasoning_gym:chain_sum?max_terms=2"
    assert [r["name"] for r in config["rewards"]] == ["reasoning_gym", "boxed_format"]
    assert "held-out accuracy before:" in printed


def check_agent(out, printed):
    config = trained(out)
    assert config["environment"]["name"] == "__main__:solve" and config["rewards"][0]["name"] == "agent_reward"
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(m["env/turns"] >= 1 and m["env/errors"] == 0 and "env/calls" in m for m in metrics)


def check_verifiers(out, printed):
    config = trained(out)
    assert config["data"]["train"].startswith("verifiers:")  # the environment's own rows
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert all("env/correct" in m and "env/brief" in m and m["reward/unscored"] == 0 for m in metrics)


def check_openenv(out, printed):
    trained(out)
    first = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert first["env/turns"] >= 1 and "env/invalid_actions" in first


def check_feedback(out, printed):
    trained(out)
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(m["env/errors"] == 0 and 1 <= m["env/turns"] <= 2 and "env/first_try" in m for m in metrics)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["before"] is not None and summary["after"] is not None  # held-out, through the agent


def check_cold_start(out, printed):
    """The SFT run (rows in memory, written to its inputs/), then GRPO from its model, then the model saved."""
    sft = out.parent / "out-sft"
    assert len((sft / "metrics.jsonl").read_text().splitlines()) == 2 and (sft / "inputs" / "train.jsonl").is_file()
    assert trained(out)["model"]["name"] == str(sft)
    assert "cold start: 2 steps" in printed and "after RL:" in printed
    assert (out.parent / "out-model" / "config.json").is_file()


def check_anthropic(out, printed):
    config = trained(out)
    assert config["environment"]["name"] == "__main__:solve"
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(m["env/turns"] >= 1 and m["env/errors"] == 0 and "env/calls" in m for m in metrics)


def check_openai_agents(out, printed):
    config = trained(out)
    assert config["environment"]["name"] == "__main__:solve"
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(m["env/turns"] >= 1 and m["env/errors"] == 0 and m["env/rows"] >= 1 for m in metrics)


def check_mcp(out, printed):
    config = trained(out)
    assert config["environment"]["name"].startswith("mcp:") and config["environment"]["name"].endswith("--serve")
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(m["env/turns"] >= 1 for m in metrics)


def check_tinker(out, printed):
    """The SDK's loop ran its steps, and its checkpoint is under the server's folder, read back whole."""
    lines = printed.splitlines()
    assert lines[0].startswith("supervised step: loss ")
    assert [x.split(":")[0] for x in lines[1:3]] == ["step 1", "step 2"]
    path = lines[3].split()[1].rstrip(";")
    model, kind, name = path.removeprefix("tinker://").split("/")
    assert (kind, name) == ("weights", "final") and (out / model / kind / name).is_dir(), path


CHECKS = {"cold_start_then_rl": check_cold_start, "tinker_sdk": check_tinker,
          "anthropic_agent": check_anthropic, "mcp_tools": check_mcp,
          "openai_agents_sdk": check_openai_agents,
          "your_reward_and_data": check_your_reward,
          "dataset_in_memory": check_dataset,
          "lora_then_transformers": check_lora, "custom_environment": check_environment,
          "evaluate_your_verifier": check_evaluation, "ported_from_trl": check_trl, "reasoning_gym_task": check_gym,
          "agent_harness": check_agent, "verifiers_environment": check_verifiers,
          "openenv_environment": check_openenv, "feedback_agent": check_feedback}
