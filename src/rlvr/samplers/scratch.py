"""Scratch folders of a run's vLLM engine (its model's config, the weights handed to a server) that a process
killed with -9 cannot remove: each is named after the process that made it, and the next one made removes
those whose process is gone.

    scratch_dir("rlvr-weights-", "/dev/shm")  →  /dev/shm/rlvr-weights-4242-k3j9x1/
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def scratch_dir(prefix: str, base: str | None = None) -> Path:
    """A new folder `<prefix><pid>-<random>` in `base` (default: the system's temporary folder), after removing
    this user's folders of the same prefix that a process no longer running left behind."""
    root = Path(base or tempfile.gettempdir())
    for old in root.glob(f"{prefix}*"):
        pid = _pid_of(old.name[len(prefix):])
        if pid is not None and pid != os.getpid() and not _running(pid) and _mine(old):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))


def _pid_of(rest: str) -> int | None:
    """The process id a folder's name starts with ("4242-k3j9x1"), or None (a name of another form).

    >>> _pid_of("4242-k3j9x1"), _pid_of("k3j9x1"), _pid_of("")
    (4242, None, None)
    """
    head = rest.split("-", 1)[0]
    return int(head) if head.isdigit() and "-" in rest else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # (another user's process: running)
        return True
    return True


def _mine(path: Path) -> bool:
    try:
        return path.is_dir() and not path.is_symlink() and path.stat().st_uid == os.getuid()
    except OSError:
        return False
