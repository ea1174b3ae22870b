"""Starting ranks from a test: torchrun (or `rlvr --nproc`) under a deadline, so that a hang fails in
seconds and leaves no process behind, and each rank on one thread (2 cores)."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[2]


def rank_env(**extra):
    """The environment of a test's ranks: one thread each, stacks printed on SIGABRT, tests importable."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1", "PYTHONPATH": str(ROOT),
            **extra}


def launch(args, env, timeout):
    """(exit code, stderr) of torchrun with `args`; past `timeout` every rank prints its Python stack
    (faulthandler, SIGABRT) and the whole process group is killed, so a hang fails here and leaves nothing."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args], env=env,
                                stdout=subprocess.DEVNULL, stderr=err, text=True, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGABRT, signal.SIGKILL):
                os.killpg(proc.pid, sig)
                time.sleep(3)
            code = -1
        err.seek(0)
        return code, ("" if code != -1 else f"timed out after {timeout} s\n") + err.read()


def children(pid):
    """The process ids whose parent is `pid` (Linux)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found
