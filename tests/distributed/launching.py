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
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)  # (keep a src/ set there)
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1", "PYTHONPATH": path, **extra}


def launch(args, env, timeout):
    """(exit code, stderr) of torchrun with `args`; past `timeout` every rank prints its Python stack
    (faulthandler, SIGABRT) and every process is killed, so a hang fails here and leaves nothing."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args], env=env,
                                stdout=subprocess.DEVNULL, stderr=err, text=True, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGABRT, signal.SIGKILL):
                signal_all(proc.pid, sig)
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


def descendants(pid):
    """The processes below `pid`: its children, theirs, ..., parents before their children (Linux)."""
    found, pending = [], children(pid)
    while pending:
        found.append(pending.pop(0))
        pending += children(found[-1])
    return found


def still_running(pids):
    """Those of `pids` that have not exited (a zombie, exited but not yet waited for, has)."""
    running = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.append(pid)
    return running


def signal_all(pid, sig):
    """`sig` to `pid`'s process group and to every process below it: torchrun starts each rank in a
    session of its own, out of reach of the group's signals."""
    for each in descendants(pid):
        try:
            os.kill(each, sig)
        except ProcessLookupError:
            pass
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def run_ranks(command, timeout, env=None):
    """`subprocess.run(command)` for a command that starts ranks (`rlvr … --nproc 2`, torchrun), its output
    captured: past `timeout` every process below it is killed too, so that a hang fails the test at once
    (subprocess.run would kill the launcher only, then wait on the ranks holding its pipes)."""
    proc = subprocess.Popen(command, env=env or rank_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    code, out, err = finish(proc, timeout, f"{command[1:5]} ")
    return subprocess.CompletedProcess(command, code, out, err)


def finish(proc, seconds, what=""):
    """(exit code, stdout, stderr) of `proc` (started in a session of its own, its output piped) within
    `seconds`; past them it and every process below it are killed and the test fails."""
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        signal_all(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{what}still running after {seconds} s:\n{err[-3000:]}") from None
    return proc.returncode, out, err
