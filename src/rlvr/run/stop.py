"""Stopping a run cleanly: the first Ctrl-C finishes the step, saves and returns; the second aborts.

Aborting never corrupts the last checkpoint, because checkpoints are renamed into place only once
complete (rlvr.run.checkpoint).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from tqdm import tqdm


class StopFlag:
    """Set by the first Ctrl-C or by a caller: finish the current step, save, return."""

    def __init__(self) -> None:
        self.stop_requested = False

    def request_stop(self) -> None:
        self.stop_requested = True


@contextmanager
def stop_on_ctrl_c(flag: StopFlag) -> Iterator[None]:
    """Within the block, the first SIGINT sets `flag`; a second one raises KeyboardInterrupt at once."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if flag.stop_requested:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        flag.request_stop()
        tqdm.write("Ctrl-C: finishing this step and saving a checkpoint (Ctrl-C again to abort without saving)")

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: no handler, Ctrl-C behaves as usual
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
