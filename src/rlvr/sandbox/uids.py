"""A uid of its own for each candidate, where rlvr runs as root (under bubblewrap, the launcher switches to
it; unisolated, the spawning process does).

Root's processes are not counted by RLIMIT_NPROC, and processes of one uid may signal one another: under a
shared 'nobody', one unisolated candidate's ``kill -9 -1`` kills every candidate running beside it. So each
candidate runs under a uid that no other process on the machine has: one of `POOL_SIZE` uids from
`FIRST_UID` (a block that systemd leaves unused, in no user database), with the group of the same number,
leased by an flock on LOCK_DIR/<uid> for as long as its processes live, so that the candidates of any number
of rlvr processes never share one. The lease ends by killing every process of the uid, so the next candidate
under it meets nothing left behind.

Where the pool cannot be used (a user namespace that does not map it, no /run), `lease` gives None: under
bubblewrap candidates then run as root without capabilities, unisolated they share 'nobody', able to signal
each other; either way only the watchdog counts their processes (docs/verifiers.md says so).
"""

from __future__ import annotations

import fcntl
import functools
import os
import random
import stat
import time
from typing import IO

from rlvr.sandbox import tree

FIRST_UID = 0x70000000  # 1879048192: systemd's users and groups documentation leaves 0x70000000... unused
POOL_SIZE = 4096
LOCK_DIR = "/run/rlvr-sandbox-uids"


class Lease:
    """A uid held for one candidate: no other lease gets it until `release`."""

    def __init__(self, uid: int, lock: IO[str]) -> None:
        self.uid, self._lock = uid, lock

    def release(self) -> None:
        """Kill every process of the uid (a daemon that escaped its tree included), then give the uid back;
        one that cannot be cleared (a fork bomb outrunning the kills) stays leased until this process ends."""
        for _ in range(100):
            left = tree.owned_by(self.uid)
            if not left:
                self._lock.close()
                return
            tree.kill(left)
            time.sleep(0.01)


def lease() -> Lease | None:
    """A uid of the pool that no other candidate holds now; None when the pool cannot be used."""
    if not _pool_usable():
        return None
    start = random.randrange(POOL_SIZE)  # concurrent leases rarely try the same uids first
    for i in range(POOL_SIZE):
        uid = FIRST_UID + (start + i) % POOL_SIZE
        lock = open(os.path.join(LOCK_DIR, str(uid)), "a")  # held until the lease is released
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return Lease(uid, lock)
    return None


@functools.cache
def _pool_usable() -> bool:
    """Whether this process is root, the pool's ids are mapped in its user namespace, and the lock folder
    is root's alone (a candidate that could write there could make two candidates share a uid)."""
    if os.geteuid() != 0 or not all(_maps_pool(f"/proc/self/{ids}_map") for ids in ("uid", "gid")):
        return False
    try:
        os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
        folder = os.lstat(LOCK_DIR)
    except OSError:
        return False
    return stat.S_ISDIR(folder.st_mode) and folder.st_uid == 0 and not folder.st_mode & 0o077


def _maps_pool(path: str) -> bool:
    """Whether one range of the id map `path` (lines "inside outside count") holds the whole pool."""
    try:
        with open(path) as f:
            ranges = [tuple(int(n) for n in line.split()) for line in f if line.strip()]
    except (OSError, ValueError):
        return False
    return any(inside <= FIRST_UID and FIRST_UID + POOL_SIZE <= inside + count for inside, _, count in ranges)
