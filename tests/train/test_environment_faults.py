"""A user's environment that breaks its contract, never answers, or exits: the run ends with one line naming the
environment and the method, the finished steps saved; Ctrl-C and SIGTERM end it in bounded time."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlvr import paths
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.run.loop import run_training

from . import faulty_envs
from .test_environments import short_messages  # noqa: F401  (a fixture: messages end at any letter)
from .test_step import tiny_config

ENVS = Path(__file__).with_name("faulty_envs.py")
ROOT = Path(__file__).parents[2]


def env_run(tmp_path, env, *extra, steps=2):
    return tiny_config(tmp_path, f"environment.name='{ENVS}:{env}'", "rewards=[{name: environment_reward}]",
                       "generation.max_new_tokens=6", "eval_before=false", "eval_after=false", *extra, steps=steps)


def test_an_environment_reward_of_nan_leaves_its_completions_unscored(tmp_path):
    train_grpo(env_run(tmp_path, "NanReward", "sample_every=1"))
    groups = [json.loads(line) for line in (tmp_path / "run" / paths.SAMPLES).read_text().splitlines()]
    assert groups and all(r is None for g in groups for r in g["rewards"])


@pytest.mark.parametrize("env, message", [
    ("StepReturnsNone", "environment StepReturnsNone.step() returned NoneType None, not a Reply "
                        "(return rlvr.envs.Reply(message={'role': 'user', 'content': ...}, done=...))"),
    ("StepReturnsText", "environment StepReturnsText.step() returned str 'the tool said 4', not a Reply"),
    ("ResetReturnsNone", "environment ResetReturnsNone.reset() returned NoneType None, not the conversation's "
                         "first messages"),
    ("ExitsInStep", "environment ExitsInStep.step() called sys.exit(5) (end a trajectory with Reply(done=True), "
                    "or raise an exception for a bug)"),
    ("TextReward", "environment TextReward.step() returned a Reply whose reward is str '1.0' (a reward is a number"),
    ("BlocksInStep", "environment BlocksInStep.step() did not return within its time limit of 0.5 s (make it "
                     "faster, or raise environment.timeout_s; 0 = no limit)"),
    ("BlocksInReset", "environment BlocksInReset.reset() did not return within its time limit of 0.5 s"),
])
def test_a_broken_environment_ends_the_run_in_one_line_after_saving_the_finished_steps(tmp_path, env, message):
    trainer = Trainer(env_run(tmp_path, "Answers", "environment.timeout_s=0.5", steps=3))

    def break_after_step_1(step, metrics, stop):
        if step == 1:
            trainer.source.sampler.make_env = getattr(faulty_envs, env)

    start = time.monotonic()
    with pytest.raises(UserError) as e:
        run_training(trainer, on_step_end=break_after_step_1)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert time.monotonic() - start < 20
    assert paths.latest_checkpoint(tmp_path / "run").name == "step-000001"


def test_a_negative_time_limit_is_a_config_error(tmp_path):
    with pytest.raises(UserError, match=r"environment.timeout_s must be >= 0 \(0 = no limit\)"):
        env_run(tmp_path, "Answers", "environment.timeout_s=-1")


def _wait_for(path, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None and not path.exists():
        time.sleep(0.2)
    assert proc.poll() is None and path.exists(), proc.communicate()[1]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_while_an_environment_blocks_saves_and_ends_the_process(tmp_path, signum):
    """No time limit, an environment blocked for ever: a stop signal gives the step up, saves the finished steps
    and the process ends (the blocked thread does not hold it); twice, if the first was missed, ends it too."""
    run, flag = tmp_path / "run", tmp_path / "hang-now"
    proc = subprocess.Popen([sys.executable, "-m", "rlvr", "train", "--config", "configs/tiny.yaml",
                             "--output-dir", str(run), "--max-steps", "100000", "--set", "save_every=0",
                             "--set", f"environment.name='{ENVS}:BlocksWhenTold'", "--set", "environment.timeout_s=0",
                             "--set", "rewards=[{name: environment_reward}]", "--set", "generation.max_new_tokens=4",
                             "--set", "eval_before=false", "--set", "eval_after=false"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "RLVR_TEST_HANG": str(flag), "OMP_NUM_THREADS": "1"})
    try:
        _wait_for(run / paths.METRICS, proc)
        flag.touch()
        _wait_for(tmp_path / "hang-now.hanging", proc)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum and "Traceback" not in stderr, stderr
    assert "abandoning this step (environment BlocksWhenTold.step() was running)" in stdout + stderr
    steps = len((run / paths.METRICS).read_text().splitlines())
    assert [p.name for p in (run / "checkpoints").iterdir()] == [f"step-{steps:06d}"]


def test_sigterm_ends_an_eval_whose_environment_swallows_every_interruption(tmp_path):
    """No time limit, and reset() catches everything: SIGTERM still ends the process, with one line, once
    rlvr.deadline has given up interrupting it (here after 1 s instead of 10)."""
    flag = tmp_path / "hang"
    script = ("import sys; from rlvr import deadline; deadline.ESCALATE_S = 1.0; from rlvr.cli import main; "
              "sys.exit(main(sys.argv[1:]))")
    proc = subprocess.Popen([sys.executable, "-c", script, "eval", "--model", "tiny", "--data", "arithmetic",
                             "--limit", "4", "--samples", "0", "--max-new-tokens", "4", "--threads", "1",
                             "--output-dir", str(tmp_path / "out"), "--set", "environment.timeout_s=0",
                             "--set", f"environment.name='{ENVS}:SwallowsInReset'"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "RLVR_TEST_HANG": str(flag)})
    try:
        _wait_for(Path(f"{flag}.hanging"), proc)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1].startswith(
        "rlvr: error: environment SwallowsInReset.reset() did not stop when interrupted (SIGTERM arrived;")
