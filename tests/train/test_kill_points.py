"""SIGKILL at any point of a step loses nothing saved: a run killed mid-decode, mid-reward, mid-update, while its
checkpoint or its metrics line is written, then resumed, ends with the unbroken run's weights, metrics and samples."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths

ROOT = Path(__file__).parents[2]
KILLER = Path(__file__).with_name("killed_run.py")
STEPS = 4
TIMING = ("seconds", "time/", "tokens_per_second", "memory/")  # what a wall clock decides


def train(run, *extra, killer=()):
    args = ["train", "--config", "configs/tiny.yaml", "--output-dir", str(run), "--max-steps", str(STEPS),
            "--set", "save_every=1", "--set", "eval_before=false", "--set", "eval_after=false", *extra]
    command = [sys.executable, str(KILLER), *killer, *args] if killer else [sys.executable, "-m", "rlvr", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def outcome(run):
    """The final weights, the metrics without wall-clock numbers, and the recorded samples."""
    weights = load_file(paths.latest_checkpoint(run) / paths.MODEL / "model.safetensors")
    metrics = [{k: v for k, v in json.loads(line).items() if not any(t in k for t in TIMING)}
               for line in (run / paths.METRICS).read_text().splitlines()]
    return weights, metrics, (run / paths.SAMPLES).read_text()


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory):
    run = tmp_path_factory.mktemp("unbroken") / "run"
    done = train(run)
    assert done.returncode == 0, done.stderr
    return outcome(run)


@pytest.mark.parametrize("point, step", [("decode", 1), ("decode", 3), ("reward", 2), ("update", 3),
                                         ("checkpoint", 2), ("checkpoint", 4), ("metrics", 3)])
def test_a_run_killed_at_any_point_resumes_to_the_unbroken_runs_end(tmp_path, unbroken, point, step):
    run = tmp_path / "run"
    killed = train(run, killer=(point, str(step)))
    assert killed.returncode == -9, killed.stderr  # it did die there
    latest = paths.latest_checkpoint(run)
    assert (latest is None and step == 1) or paths.step_of(latest) == step - 1  # the step it died in is lost
    resumed = (subprocess.run([sys.executable, "-m", "rlvr", "train", "--resume", str(run)], cwd=ROOT,
                              capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
               if latest is not None else train(run))  # (killed before its first checkpoint: started again)
    assert resumed.returncode == 0, resumed.stderr
    weights, metrics, samples = outcome(run)
    assert weights.keys() == unbroken[0].keys() and all(torch.equal(w, unbroken[0][k]) for k, w in weights.items())
    assert metrics == unbroken[1] and samples == unbroken[2]


AHEAD = ["--set", "sampling.max_staleness=1"]


@pytest.fixture(scope="module")
def unbroken_ahead(tmp_path_factory):
    run = tmp_path_factory.mktemp("unbroken-ahead") / "run"
    done = train(run, *AHEAD)
    assert done.returncode == 0, done.stderr
    return outcome(run)


@pytest.mark.parametrize("point, step", [("decode", 3), ("reward", 2), ("update", 3), ("checkpoint", 3)])
def test_a_run_sampling_ahead_killed_at_any_point_resumes_to_the_unbroken_runs_end(tmp_path, unbroken_ahead, point,
                                                                                   step):
    """The worker's batches sampled ahead travel in the checkpoint: killed anywhere (the worker decoding or
    scoring the next batch included), the resumed run is the unbroken one."""
    run = tmp_path / "run"
    killed = train(run, *AHEAD, killer=(point, str(step)))
    assert killed.returncode == -9, killed.stderr
    resumed = subprocess.run([sys.executable, "-m", "rlvr", "train", "--resume", str(run)], cwd=ROOT,
                             capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert resumed.returncode == 0, resumed.stderr
    weights, metrics, samples = outcome(run)
    assert all(torch.equal(w, unbroken_ahead[0][k]) for k, w in weights.items())
    assert metrics == unbroken_ahead[1] and samples == unbroken_ahead[2]


def test_killed_with_a_broken_tokenizer_in_the_latest_checkpoint_resumes_from_the_one_before(tmp_path, unbroken):
    """Killed in step 4, and the latest checkpoint's tokenizer.json then cut (a disk, a sync): the resume falls back
    to step 2's checkpoint (its manifest says the file changed) and still ends as the unbroken run."""
    run = tmp_path / "run"
    assert train(run, killer=("update", "4")).returncode == -9
    tokenizer = paths.latest_checkpoint(run) / paths.MODEL / "tokenizer.json"
    tokenizer.write_bytes(tokenizer.read_bytes()[:100])
    resumed = subprocess.run([sys.executable, "-m", "rlvr", "train", "--resume", str(run)], cwd=ROOT,
                             capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert resumed.returncode == 0, resumed.stderr
    assert "model/tokenizer.json is 100 bytes" in resumed.stderr and "resuming from step 2" in resumed.stderr
    weights, metrics, samples = outcome(run)
    assert all(torch.equal(w, unbroken[0][k]) for k, w in weights.items())
    assert metrics == unbroken[1] and samples == unbroken[2]


def test_a_run_ended_by_os_exit_in_a_reward_resumes_like_one_killed(tmp_path):
    """os._exit() in a user's function ends the process then and there (no line can be said: nothing runs
    after it); the run resumes from its last checkpoint to the end an unbroken run reaches, as after kill -9."""
    reward = ["--set", f"rewards=[{{name: '{Path(__file__).with_name('reward_fns.py')}:digit_share_then_os_exit'}}]"]
    command = [sys.executable, "-m", "rlvr", "train", "--config", "configs/tiny.yaml", "--max-steps", str(STEPS),
               "--set", "save_every=1", "--set", "eval_before=false", "--set", "eval_after=false", *reward]

    def train_until(run, call):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "RLVR_TEST_EXIT_AT": str(call),
               "RLVR_TEST_EXIT_COUNT": str(run.with_name(run.name + ".calls"))}
        return subprocess.run([*command, "--output-dir", str(run)], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, env=env)

    whole = train_until(tmp_path / "whole", 10**9)
    assert whole.returncode == 0, whole.stderr
    calls = int((tmp_path / "whole.calls").read_text()) // STEPS  # (the reward's calls a step: one a group)
    run = tmp_path / "run"
    ended = train_until(run, 2 * calls + 1)  # (step 3's first)
    assert ended.returncode == 5 and paths.step_of(paths.latest_checkpoint(run)) == 2, ended.stderr
    resumed = subprocess.run([sys.executable, "-m", "rlvr", "train", "--resume", str(run)], cwd=ROOT,
                             capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert resumed.returncode == 0, resumed.stderr
    weights, metrics, samples = outcome(run)
    expected = outcome(tmp_path / "whole")
    assert all(torch.equal(w, expected[0][k]) for k, w in weights.items())
    assert metrics == expected[1] and samples == expected[2]
