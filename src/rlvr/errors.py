"""The one exception type for mistakes a user can fix (bad config, missing file, malformed row).

The CLI prints these as a single line, without a traceback; everything else is a bug and
keeps its traceback. From Python, the entry points (`front_door`) raise them from the caller's call, without
rlvr's internal frames. A fix is worded for whoever called: `--resume RUN_DIR` on the command line,
`resume=True` from Python (`for_caller`, inside `python_caller()`: rlvr.api).
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

_FROM_PYTHON: ContextVar[bool] = ContextVar("rlvr_from_python", default=False)


@contextmanager
def python_caller() -> Iterator[None]:
    """Within it, fixes are worded for a Python caller."""
    token = _FROM_PYTHON.set(True)
    try:
        yield
    finally:
        _FROM_PYTHON.reset(token)


def for_caller(cli: str, python: str) -> str:
    """`cli` on the command line, `python` inside `python_caller()`.

    >>> for_caller("--resume runs/a", "resume=True")
    '--resume runs/a'
    >>> with python_caller():
    ...     for_caller("--resume runs/a", "resume=True")
    'resume=True'
    """
    return python if _FROM_PYTHON.get() else cli


class UserError(Exception):
    """A problem with the user's input; the message names the cause and the fix."""


# set (to 1) to keep rlvr's own frames in a UserError's traceback, and the traceback of a path's error (path_error)
FULL_TRACEBACK_ENV = "RLVR_FULL_TRACEBACK"
F = TypeVar("F", bound=Callable[..., Any])


def front_door(fn: F) -> F:
    """An entry point of rlvr's Python API: a UserError raised anywhere within it is raised again from here,
    without rlvr's frames or the exceptions it was raised from, so the caller's traceback is their own call
    and the one line naming the cause and the fix. $RLVR_FULL_TRACEBACK=1 keeps every frame (for debugging)."""

    @functools.wraps(fn)
    def entry(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            if os.environ.get(FULL_TRACEBACK_ENV, "") not in ("", "0"):
                raise
            raise e.with_traceback(None) from None

    return entry  # type: ignore[return-value]


class Interrupted(UserError):
    """Ctrl-C or SIGTERM stopped a command that kept what it finished (eval, sample): its message says where and
    how to go on; the command exits 128 + the signal's number (130, 143), as the shell's convention has it."""


class StepAbandoned(KeyboardInterrupt):
    """Ctrl-C or SIGTERM while a step cannot finish on its own (a user's reward function is running):
    the step is given up, the run saved as it was before the step, and stopped."""


def a_kind(value: Any) -> str:
    """The type of `value` with its article, for one-line errors ("is an int", "is a str").

    >>> a_kind(42), a_kind("x"), a_kind(None)
    ('an int', 'a str', 'a NoneType')
    """
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def first_line(error: BaseException) -> str:
    """The first line of an error's message (at most 300 characters), or its type's name when it has none.

    >>> first_line(ValueError("bad value\\nmore detail")), first_line(KeyError())
    ('bad value', 'KeyError')
    """
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


_PATH_FIXES = {
    errno.EISDIR: "a folder stands where a file is wanted: give a file's path",
    errno.ENOTDIR: "a file stands where a folder is wanted: give a folder's path",
    errno.EEXIST: "a file stands where a folder is wanted: give a folder's path",
    errno.ENOENT: "check the path: the folders above it must exist, or be ones rlvr can make",
    errno.EACCES: "check its permissions: rlvr reads or writes it",
    errno.EPERM: "check its permissions: rlvr reads or writes it",
    errno.EROFS: "the file system is read-only: give a path on a writable one",
    errno.ENOSPC: "the disk is full: free some space, or give a folder on another disk",
    errno.EDQUOT: "the disk quota is used up: free some space, or give a folder on another disk",
}
_DISK = (errno.ENOSPC, errno.EDQUOT)  # (said with or without a path)


def path_error(error: OSError) -> str | None:
    """One line for an OSError about a path the user gave or the machine's disk (a folder where a file is wanted, no
    permission, a full disk), naming the path (a rename's target) and the fix; None for any other OSError (a
    socket's, a program not found, a folder made twice: a bug's).

    >>> path_error(IsADirectoryError(errno.EISDIR, "Is a directory", "data.jsonl"))
    "Is a directory: data.jsonl (a folder stands where a file is wanted: give a file's path)"
    >>> path_error(OSError(errno.ENOSPC, "No space left on device"))
    'No space left on device (the disk is full: free some space, or give a folder on another disk)'
    >>> [path_error(e) for e in (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
    ...                          FileNotFoundError(errno.ENOENT, "No such file or directory", "nvidia-smi"))]
    [None, None]
    """
    fix = _PATH_FIXES.get(error.errno or 0)
    path = error.filename2 if error.filename2 is not None else error.filename
    if fix is None or (path is None and error.errno not in _DISK):
        return None
    if error.errno == errno.ENOENT and os.sep not in str(path):  # (a program's name: subprocess found none)
        return None
    if error.errno == errno.EEXIST and not os.path.isfile(path):  # (a folder made twice)
        return None
    return f"{error.strerror}{'' if path is None else f': {path}'} ({fix})"
