"""No process of a run outlives the one that started it.

`rlvr … --nproc N` starts torchrun, and torchrun starts the ranks, each in a session of its own. A
parent killed by SIGKILL (by hand, by the OOM killer) has no chance to pass a signal on: its children
trained on, holding the run's lock. So each child asks the kernel (Linux's PR_SET_PDEATHSIG) for a
SIGTERM when its parent dies, however it dies, and stops as on any SIGTERM: torchrun passes it on to
the ranks, which finish their step and save a checkpoint (rlvr.run.stop). Elsewhere than Linux, nothing.

The signal comes when the parent *thread* that started the child exits: the launcher and torchrun
start their children from their main thread, which lives as long as they do.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_PID = "RLVR_PARENT_PID"  # the pid of the rlvr process (launcher, torchrun) that started this one
PR_SET_PDEATHSIG = 1  # <sys/prctl.h>


def child_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a child of this process that calls `end_with_parent`: it names this process as its parent."""
    return {**env, PARENT_PID: str(os.getpid())}


def end_with_parent() -> None:
    """SIGTERM to this process when its parent dies. The parent is the process named by $RLVR_PARENT_PID
    (`child_env`; taken out of the environment, so that this process's own children do not read it),
    or else the parent it has now."""
    parent = int(os.environ.pop(PARENT_PID, os.getppid()))
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        return  # (a kernel that refuses: the process is as it was without this)
    if os.getppid() != parent:  # the parent died before it could be watched: no signal will come
        os.kill(os.getpid(), signal.SIGTERM)


def stop_watching_parent() -> None:
    """No more SIGTERMs for parent deaths (this process has been asked to stop already). A parent that dies
    sends one per reparenting: when the thread that started this process exits (this process is then the
    child of another thread of the same parent), and again when its last thread does, at times apart
    that a loaded machine stretches past a second, where a second signal means "abort without saving"
    (rlvr.run.stop)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
