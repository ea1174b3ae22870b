"""Faults on 2 ranks under torchrun: SIGTERM to one rank (a scheduler's pre-emption, a `kill`) leads
every rank to save the same step and exit 0; a rank whose reward raises ends every rank, non-zero,
within a minute, with that rank's one-line error."""

import os
import signal
import subprocess
import sys
import time

import pytest

from ..train.test_step import REWARD_FNS, TINY
from .launching import ROOT, children, finish, launch, rank_env

HERE = ROOT / "tests" / "distributed"


def torchrun_train(run, *settings, nproc=False):
    """`rlvr train` on 2 ranks: under torchrun itself, or (`nproc`) through `rlvr train --nproc 2`."""
    sets = [a for kv in [*TINY, *settings] for a in ("--set", kv)]
    launcher = ["--nproc", "2"] if nproc else []
    torchrun = [] if nproc else ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    return subprocess.Popen([sys.executable, *torchrun, "-m", "rlvr", "train", *launcher, *sets,
                             "--output-dir", str(run)], env=rank_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.parametrize("how", ["SIGTERM to one rank under torchrun", "Ctrl-C to rlvr train --nproc 2"])
def test_a_stop_asked_of_one_rank_or_the_launcher_saves_the_same_step_everywhere_and_exits_0(tmp_path, how):
    run, nproc = tmp_path / "run", how.endswith("--nproc 2")
    proc = torchrun_train(run, "max_steps=400", "eval_before=false", "eval_after=false", nproc=nproc)
    metrics, deadline = run / "metrics.jsonl", time.time() + 120
    while not (metrics.is_file() and metrics.read_text().count("\n") >= 2) and time.time() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.2)
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
    assert len(metrics.read_text().splitlines()) == step


def test_a_rank_that_fails_ends_every_rank_with_its_error(tmp_path):
    started = time.time()
    proc = torchrun_train(tmp_path / "run", f"rewards=[{{name: '{REWARD_FNS}:has_digit_but_rank_1_fails'}}]",
                          "eval_before=false", nproc=True)
    code, _, err = finish(proc, 60)
    assert code != 0 and time.time() - started < 60
    assert "rlvr: error (rank 1): " in err and "broken on purpose" in err, err[-3000:]
    assert "rlvr: error (rank 0): another rank stopped" in err and "rank 1 failed first (exit code 2)" in err
    assert "Traceback" not in err, err[-3000:]


def test_a_signal_landing_after_the_ranks_agreed_to_go_on_waits_for_the_next_agreement(tmp_path):
    import torch

    sets = [*TINY, "max_steps=6", "eval_before=false", "eval_after=false", f"output_dir={tmp_path / 'run'}"]
    code, stderr = launch(["--standalone", "--nproc_per_node", "2", str(HERE / "late_signal_worker.py"),
                           str(tmp_path), *sets], rank_env(), timeout=120)
    assert code == 0, stderr[-4000:]
    summaries = torch.load(tmp_path / "summaries.pt", weights_only=False)
    assert [s["stopped_at"] for s in summaries] == [3, 3]  # both ranks ran step 3 and saved it
