"""Faults on 2 ranks under torchrun: SIGTERM to one rank (a scheduler's pre-emption, a `kill`) leads
every rank to save the same step and exit 0; a rank whose reward raises ends every rank, non-zero,
within a minute, with that rank's one-line error; SIGKILL to `rlvr --nproc 2` or to its torchrun
leaves no process behind, and the run saved and resumable."""

import fcntl
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ..train.test_step import REWARD_FNS, TINY
from .launching import ROOT, children, descendants, finish, launch, rank_env, run_ranks, still_running

HERE = ROOT / "tests" / "distributed"


def torchrun_train(run, *settings, nproc=False):
    """`rlvr train` on 2 ranks: under torchrun itself, or (`nproc`) through `rlvr train --nproc 2`."""
    sets = [a for kv in [*TINY, *settings] for a in ("--set", kv)]
    launcher = ["--nproc", "2"] if nproc else []
    torchrun = [] if nproc else ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    return subprocess.Popen([sys.executable, *torchrun, "-m", "rlvr", "train", *launcher, *sets,
                             "--output-dir", str(run)], env=rank_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for_steps(proc, run, steps, seconds=120):
    """Wait until the run has logged `steps` steps (metrics.jsonl)."""
    metrics, deadline = run / "metrics.jsonl", time.time() + seconds
    while not (metrics.is_file() and metrics.read_text().count("\n") >= steps) and time.time() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.2)


@pytest.mark.parametrize("how", ["SIGTERM to one rank under torchrun", "Ctrl-C to rlvr train --nproc 2"])
def test_a_stop_asked_of_one_rank_or_the_launcher_saves_the_same_step_everywhere_and_exits_0(tmp_path, how):
    run, nproc = tmp_path / "run", how.endswith("--nproc 2")
    proc = torchrun_train(run, "max_steps=400", "eval_before=false", "eval_after=false", nproc=nproc)
    wait_for_steps(proc, run, 2)
    if nproc:
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the launcher's whole process group
    else:
        ranks = children(proc.pid)
        assert len(ranks) == 2, ranks
        os.kill(max(ranks), signal.SIGTERM)  # one rank only
    code, out, err = finish(proc, 60)
    assert code == 0, err[-3000:]
    stopped = [line for line in out.splitlines() if "stopped at step" in line]
    assert len(stopped) == 1, out[-2000:]  # rank 0 says it, once
    step = int(stopped[0].split("stopped at step ")[1].split(";")[0])
    assert step < 400 and [p.name for p in (run / "checkpoints").iterdir()] == [f"step-{step:06d}"]
    assert len((run / "metrics.jsonl").read_text().splitlines()) == step


@pytest.mark.parametrize("killed", ["launcher", "torchrun"])
def test_sigkill_to_the_launcher_or_torchrun_stops_every_rank_with_a_checkpoint_and_frees_the_run(tmp_path, killed):
    """SIGKILL gives the process no chance to pass a signal on: its children get SIGTERM from the kernel
    (rlvr.lifeline), finish their step and save. Without it the ranks trained on, holding the lock."""
    run = tmp_path / "run"
    proc = torchrun_train(run, "max_steps=400", "eval_before=false", "eval_after=false", nproc=True)
    wait_for_steps(proc, run, 2)
    below = descendants(proc.pid)  # torchrun, then its 2 ranks
    assert len(below) == 3, below
    try:
        os.kill(proc.pid if killed == "launcher" else below[0], signal.SIGKILL)
        deadline = time.time() + 60
        while still_running(below) and time.time() < deadline:
            time.sleep(0.2)
        assert not still_running(below), f"{still_running(below)} still running 60 s after the SIGKILL"
    finally:
        for pid in still_running(below):
            os.kill(pid, signal.SIGKILL)
    code, out, err = finish(proc, 10)  # every process that held its output has exited
    assert code == (-9 if killed == "launcher" else 137), err[-3000:]
    if killed == "torchrun":  # the launcher, alive, says what happened
        assert "rlvr: torchrun was killed by signal 9 (SIGKILL); its ranks got SIGTERM" in err, err[-3000:]
    stopped = [line for line in out.splitlines() if "stopped at step" in line]
    assert len(stopped) == 1, out[-2000:] + err[-3000:]
    step = int(stopped[0].split("stopped at step ")[1].split(";")[0])
    assert [p.name for p in (run / "checkpoints").iterdir()] == [f"step-{step:06d}"]
    with open(run / ".rlvr.lock") as lock:  # free
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    resumed = run_ranks([sys.executable, "-m", "rlvr", "train", "--resume", str(run), "--max-steps", str(step + 1)],
                        timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len((run / "metrics.jsonl").read_text().splitlines()) == step + 1


def test_a_rank_that_fails_ends_every_rank_with_its_error(tmp_path):
    started = time.time()
    fails = f"rewards=[{{name: '{REWARD_FNS}:has_digit_but_rank_1_fails', correctness: true}}]"
    proc = torchrun_train(tmp_path / "run", fails, "eval_before=false", nproc=True)
    code, _, err = finish(proc, 60)
    assert code != 0 and time.time() - started < 60
    assert "rlvr: error (rank 1): " in err and "broken on purpose" in err, err[-3000:]
    # rank 0 waited for rank 1 and says so, or (a slow machine) torchrun's SIGTERM reached it before it waited
    assert "rlvr: error (rank 0): another rank stopped" in err or "rlvr: interrupted" in err, err[-3000:]
    assert "rlvr: rank 1 failed first: exit code 2; its error is above" in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]


def test_a_rank_that_waits_past_the_timeout_says_so_in_one_line(tmp_path):
    """Rank 1 stalls in its reward at step 2; rank 0, waiting for its groups, gives up after timeout_s."""
    stalls = f"rewards=[{{name: '{REWARD_FNS}:has_digit_but_rank_1_stalls', correctness: true}}]"
    proc = torchrun_train(tmp_path / "run", stalls, "distributed.timeout_s=5", "eval_before=false",
                          "eval_after=false", nproc=True)
    code, _, err = finish(proc, 90)
    assert code != 0 and "Traceback" not in err, err[-3000:]
    waited = [line for line in err.splitlines() if "rlvr: error (rank 0)" in line]
    assert len(waited) == 1 and re.fullmatch(
        r"rlvr: error \(rank 0\): gave up after 5 s waiting for the other ranks in all_gather_object, called by "
        r"score_round \(rlvr/rl/rollouts.py:\d+\): another rank is stalled or much slower than this one \(a "
        r"reward that hangs, say\); if its work can take that long, raise distributed.timeout_s \(now 5 s\)",
        waited[0]), err[-3000:]
    assert "rlvr: rank 0 failed first: exit code 1; its error is above" in err


def test_a_rank_killed_leaves_the_last_checkpoint_and_no_promise_of_another(tmp_path):
    """SIGKILL to one rank: the other stops without saving, and says so; torchrun says how the rank ended."""
    run = tmp_path / "run"
    proc = torchrun_train(run, "max_steps=400", "save_every=2", "eval_before=false", "eval_after=false",
                          "generation.max_new_tokens=64", nproc=True)
    wait_for_steps(proc, run, 3)
    os.kill(max(descendants(proc.pid)), signal.SIGKILL)  # (rank 1: started after rank 0)
    code, out, err = finish(proc, 60)
    assert code == 1 and "Traceback" not in err, err[-3000:]
    assert "rlvr: rank 1 failed first: killed by signal 9 (SIGKILL), without an error message" in err, err[-3000:]
    assert ("rlvr: error (rank 0): another rank stopped, so this one stops too, without saving: "
            "the latest checkpoint, if any, stands") in err, err[-3000:]
    assert "and saving a checkpoint" not in out  # (if torchrun's SIGTERM reached rank 0 before the failure did)
    saved = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert saved and all(p.startswith("step-") for p in saved)  # complete checkpoints only, every 2 steps


def test_a_signal_landing_after_the_ranks_agreed_to_go_on_waits_for_the_next_agreement(tmp_path):
    import torch

    sets = [*TINY, "max_steps=6", "eval_before=false", "eval_after=false", f"output_dir={tmp_path / 'run'}"]
    code, stderr = launch(["--standalone", "--nproc_per_node", "2", str(HERE / "late_signal_worker.py"),
                           str(tmp_path), *sets], rank_env(), timeout=120)
    assert code == 0, stderr[-4000:]
    summaries = torch.load(tmp_path / "summaries.pt", weights_only=False)
    assert [s["stopped_at"] for s in summaries] == [3, 3]  # both ranks ran step 3 and saved it
