"""Process trees read from /proc: who descends from a pid, and killing them without pid reuse.

A pid is identified together with its start time (field 22 of /proc/PID/stat), so a pid seen
earlier and reused since by an unrelated process is never signalled.
"""

from __future__ import annotations

import os
import signal

Proc = tuple[int, int]
"""(pid, start time in clock ticks since boot)."""


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live, non-zombie process; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name sits in brackets and may itself hold spaces or brackets: split after it.
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[1]), int(fields[19])


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


# Kernels built with CONFIG_PROC_CHILDREN list each task's children: walking them costs as much
# as the tree is big. Without it, every process on the machine has to be read.
HAS_CHILDREN_FILES = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def descendants(root: int) -> list[Proc]:
    """Every live process below `root` (not `root` itself), parents before children."""
    if not HAS_CHILDREN_FILES:
        return _descendants_by_scan(root)
    found: list[Proc] = []
    frontier = [root]
    while frontier:
        for pid in _children(frontier.pop(0)):
            stat = _stat(pid)
            if stat is not None:
                found.append((pid, stat[1]))
                frontier.append(pid)
    return found


def _children(pid: int) -> list[int]:
    """Children of every thread of `pid` (a thread's fork is that thread's child)."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids  # gone
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids.extend(int(kid) for kid in f.read().split())
        except OSError:
            continue  # the thread ended meanwhile
    return kids


def _descendants_by_scan(root: int) -> list[Proc]:
    """`descendants` from the parent pid of every process on the machine."""
    children: dict[int, list[Proc]] = {}
    for pid in _all_pids():
        stat = _stat(pid)
        if stat is not None:
            children.setdefault(stat[0], []).append((pid, stat[1]))
    found: list[Proc] = []
    frontier = [root]
    while frontier:
        kids = children.get(frontier.pop(0), [])
        found.extend(kids)
        frontier.extend(pid for pid, _ in kids)
    return found


def is_alive(proc: Proc) -> bool:
    """True while this very process (same pid and start time) is running."""
    stat = _stat(proc[0])
    return stat is not None and stat[1] == proc[1]


def kill(procs: list[Proc]) -> None:
    """SIGKILL each process that is still the one recorded (a reused pid is left alone)."""
    for proc in procs:
        if is_alive(proc):
            try:
                os.kill(proc[0], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def holding(token: bytes) -> list[Proc]:
    """Processes whose initial environment contains `token`.

    The environment block a process was started with stays in /proc/PID/environ even after it
    clears ``os.environ``, so this finds daemons that left the process group with setsid().
    """
    found: list[Proc] = []
    for pid in _all_pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        stat = _stat(pid)
        if token in environ and stat is not None and pid != os.getpid():
            found.append((pid, stat[1]))
    return found


def owned_by(uid: int) -> list[Proc]:
    """Live processes whose real uid is `uid` (from /proc/PID/status, which a process cannot hide or forge)."""
    found: list[Proc] = []
    for pid in _all_pids():
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                lines = f.read().split(b"\n")
        except OSError:
            continue
        real = next((line.split()[1] for line in lines if line.startswith(b"Uid:")), None)
        stat = _stat(pid) if real == str(uid).encode() else None
        if stat is not None:
            found.append((pid, stat[1]))
    return found
