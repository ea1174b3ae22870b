"""CPU threads: idle OpenMP threads spin briefly, then sleep (measured in bench/threads_under_load.py), and
a run uses no more threads than the CPUs it may run on."""

import os
import subprocess
import sys

import torch

from rlvr.run.process import default_threads


def _wait_policy(**env):
    """(OMP_WAIT_POLICY, GOMP_SPINCOUNT) in a process that imports rlvr with `env` set."""
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")} | env
    script = "import rlvr, os, torch; print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"
    return subprocess.run([sys.executable, "-c", script], env=clean, capture_output=True, text=True,
                          timeout=120).stdout.split()


def test_openmp_threads_spin_briefly_then_sleep_unless_the_user_says_otherwise():
    assert _wait_policy() == ["PASSIVE", "10000"]
    assert _wait_policy(OMP_WAIT_POLICY="ACTIVE") == ["ACTIVE", "None"]
    assert _wait_policy(GOMP_SPINCOUNT="300000") == ["None", "300000"]


def test_threads_are_capped_by_the_cpus_the_process_may_use(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert default_threads() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(1024)))
    assert default_threads() == torch.get_num_threads()
