"""The one exception type for mistakes a user can fix (bad config, missing file, malformed row).

The CLI prints these as a single line, without a traceback; everything else is a bug and
keeps its traceback. A fix is worded for whoever called: `--resume RUN_DIR` on the command line,
`resume=True` from Python (`for_caller`, inside `python_caller()`: rlvr.api).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

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


class StepAbandoned(KeyboardInterrupt):
    """Ctrl-C or SIGTERM while a step cannot finish on its own (a user's reward function is running):
    the step is given up, the run saved as it was before the step, and stopped."""


def first_line(error: BaseException) -> str:
    """The first line of an error's message (at most 300 characters), or its type's name when it has none.

    >>> first_line(ValueError("bad value\\nmore detail")), first_line(KeyError())
    ('bad value', 'KeyError')
    """
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__
