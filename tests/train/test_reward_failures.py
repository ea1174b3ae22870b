"""A user's reward that hangs, is interrupted, or calls sys.exit: the run stops with one line naming it,
and is saved as it was before the failed step, so resuming it equals an unbroken run."""

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import TrainConfig
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.rewards import RewardSpec
from rlvr.run.directory import resume_config
from rlvr.run.loop import run_training

from . import reward_fns
from .test_step import DIGITS, tiny_config

QUIET = ["eval_before=false", "eval_after=false"]


def _swap_reward_after_step_1(trainer, spec, seen):
    """At the end of step 1, replace the reward with `spec`, remembering the prompt order there."""
    def on_step_end(step, metrics, stop):
        if step == 1:
            seen["order"] = copy.deepcopy(trainer.source.prompts.state_dict())
            trainer.parts.rewards[0] = spec
    return on_step_end


def _weights(run):
    return load_file(paths.latest_checkpoint(run) / "model" / "model.safetensors")


@pytest.mark.parametrize("fn, limit, message", [
    (reward_fns.hang, 0.5, "reward function 'mine:hang' did not return within its time limit of 0.5 s "
                           "(make it faster, or raise rewards[].timeout_s; 0 = no limit)"),
    (reward_fns.exits, None, "reward function 'mine:exits' called sys.exit(3)"),
    (reward_fns.interrupts, None, "reward function 'mine:interrupts' raised KeyboardInterrupt itself: a run is "
                                  "stopped by Ctrl-C, not by its functions"),
    (reward_fns.swallows_interrupts, 0.5, "reward function 'mine:swallows_interrupts' did not return within its "
                                          "time limit of 0.5 s"),
    (reward_fns.ignores_ctrl_c, 0.5, "reward function 'mine:ignores_ctrl_c' did not return within its time limit"),
])
def test_a_reward_that_hangs_or_exits_stops_the_run_with_one_line_after_saving(tmp_path, fn, limit, message):
    trainer, seen = Trainer(tiny_config(tmp_path, DIGITS, *QUIET, steps=3)), {}
    name = f"mine:{fn.__name__}"
    start = time.monotonic()
    with pytest.raises(UserError) as e:
        run_training(trainer, on_step_end=_swap_reward_after_step_1(trainer, RewardSpec(name, fn, 1.0, limit), seen))
    assert time.monotonic() - start < 15  # not the 30 s per completion the reward would take, nor an hour
    assert message in str(e.value) and "\n" not in str(e.value)
    assert paths.latest_checkpoint(tmp_path / "run").name == "step-000001"
    assert trainer.source.prompts.state_dict() == seen["order"]  # the failed step's prompts are not consumed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C works after the run


def test_ctrl_c_while_a_reward_hangs_abandons_the_step_and_the_resumed_run_equals_an_unbroken_one(tmp_path):
    train_grpo(tiny_config(tmp_path / "a", DIGITS, *QUIET, steps=2))
    trainer, seen = Trainer(tiny_config(tmp_path / "b", DIGITS, *QUIET, steps=2)), {}
    spec = RewardSpec("mine:interrupted_while_hanging", reward_fns.interrupted_while_hanging)
    result = run_training(trainer, on_step_end=_swap_reward_after_step_1(trainer, spec, seen))
    run_b = tmp_path / "b" / "run"
    assert result["stopped_at"] == 1 and paths.latest_checkpoint(run_b).name == "step-000001"

    train_grpo(resume_config(TrainConfig, run_b), resume=True)
    unbroken, resumed = _weights(tmp_path / "a" / "run"), _weights(run_b)
    assert all(torch.equal(p, resumed[name]) for name, p in unbroken.items())
    assert [json.loads(line)["step"] for line in (run_b / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_a_user_reward_gets_the_configured_limit_and_built_ins_their_own(tmp_path):
    config = tiny_config(tmp_path, QUIET[0], f"rewards=[{{name: '{reward_fns.__file__}:digit_share', timeout_s: 7, "
                                             "correctness: true},"
                                             "{name: boxed_format}]")
    assert [s.timeout_s for s in Trainer(config).parts.rewards] == [7.0, None]
    with pytest.raises(UserError, match="timeout_s must be >= 0"):
        tiny_config(tmp_path, "rewards=[{name: boxed_format, timeout_s: -1}]")


def test_a_reward_nothing_can_interrupt_ends_the_process_in_one_line_keeping_the_last_checkpoint(tmp_path):
    """Stage 3 of rlvr.deadline in a real run: the limit passes, the interruptions never land, the process ends
    (here 1 s after the first one instead of 10) naming the checkpoint that stands, and the run resumes from it."""
    run, flag, root = tmp_path / "run", tmp_path / "hang-now", Path(__file__).parents[2]
    reward = f"{Path(reward_fns.__file__)}:uninterruptible_when_told"
    script = ("import sys; from rlvr import deadline; deadline.ESCALATE_S = 1.0; from rlvr.cli import main; "
              "sys.exit(main(sys.argv[1:]))")
    args = ["train", "--config", "configs/tiny.yaml", "--output-dir", str(run), "--max-steps", "100000",
            "--set", "save_every=1", "--set", f"rewards=[{{name: '{reward}', timeout_s: 1}}]"]
    proc = subprocess.Popen([sys.executable, "-c", script, *args], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "RLVR_TEST_HANG": str(flag), "OMP_NUM_THREADS": "1"})
    try:
        _wait_until(lambda: paths.latest_checkpoint(run) is not None, proc)
        flag.touch()
        _wait_until(lambda: Path(f"{flag}.hanging").exists(), proc)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    latest = paths.latest_checkpoint(run)
    assert proc.returncode == 2 and stderr.strip().splitlines()[-1] == (
        f"rlvr: error: reward function '{reward}' did not stop when interrupted (its time limit of 1 s "
        "(rewards[].timeout_s) passed; it catches the interruption, or is stuck outside Python): the process ends "
        f"here without finishing the step; the last checkpoint, {latest}, is kept: continue with rlvr train "
        f"--resume {run}")
    flag.unlink()
    step = paths.step_of(latest)
    resumed = subprocess.run([sys.executable, "-m", "rlvr", "train", "--resume", str(run), "--max-steps",
                              str(step + 1), "--set", "eval_after=false"], cwd=root, capture_output=True, text=True,
                             timeout=300, env={**os.environ, "RLVR_TEST_HANG": str(flag)})
    assert resumed.returncode == 0, resumed.stderr
    assert paths.step_of(paths.latest_checkpoint(run)) == step + 1


def _wait_until(condition, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None and not condition():
        time.sleep(0.2)
    assert proc.poll() is None and condition(), proc.communicate()[1]
