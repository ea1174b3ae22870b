"""One process per run directory: a second `rlvr train` (or sft, rm) into the same folder is refused.

The lock is an advisory `flock` on RUN_DIR/.rlvr.lock, released by the kernel when the process exits,
however it exits, so a crashed run never leaves a stale lock behind. The lock is held for the whole run,
so it is also where a disk found full outside a checkpoint (the lock itself, config.yaml, metrics.jsonl)
becomes one line.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlvr.errors import UserError, for_caller
from rlvr.run.checkpoint import no_space_left, run_out_of_space

LOCK_FILE = ".rlvr.lock"
_held: set[Path] = set()  # run directories this process has locked (launch locks, run_training nests)


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run directory's lock for the block; a UserError naming the other process if it is held, and
    one naming the folder if the disk is full (checkpoints say so themselves: rlvr.run.checkpoint.disk_full)."""
    key = run_dir.resolve()
    if key in _held:
        yield
        return
    created, held = not run_dir.exists(), False
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with _locked(run_dir / LOCK_FILE):
            _held.add(key)
            held = True
            try:
                yield
            finally:
                _held.discard(key)
    except BaseException as error:
        if created and run_dir.is_dir():  # a run that failed to start (a bad data file, say) leaves no folder
            (run_dir / LOCK_FILE).unlink(missing_ok=True)
            if not any(run_dir.iterdir()):
                run_dir.rmdir()
        if isinstance(error, OSError) and no_space_left(error):
            raise run_out_of_space(run_dir) from None
        if isinstance(error, OSError) and not held and error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise UserError(f"cannot write the run directory {run_dir}: {error.strerror}; give a writable "
                            f"{for_caller('--output-dir', 'output_dir')}") from None
        raise


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            owner = f.read().strip() or "unknown"
            raise UserError(f"{path.parent} is in use by another rlvr process (pid {owner}): wait for it to finish, "
                            "or pick another --output-dir") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        yield
