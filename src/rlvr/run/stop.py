"""Stopping a run cleanly: the first Ctrl-C or SIGTERM finishes the step, saves and returns; a second aborts.

While a user's reward function or environment runs, the step may never finish (the code may hang), so the
first signal abandons it instead: the recipe rolls back to the start of the step, and the run is saved there.
User code that swallows the interruption is interrupted again, and the process ends if it has not returned
within rlvr.deadline.ESCALATE_S (the last checkpoint kept).

SIGTERM is what schedulers, `docker stop` and `kill` send: it gets the same treatment as Ctrl-C, so
a run stopped from outside is saved and resumable, whatever `save_every` says. A scheduler that signals
every process of a job (SLURM's scancel, say) reaches each rank twice, directly and passed on by
torchrun: a repeat within REPEAT_S of the first signal is the same request, not the second that aborts. Aborting never
corrupts the last checkpoint, because checkpoints are renamed into place only once complete
(rlvr.run.checkpoint).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from tqdm import tqdm

from rlvr import deadline
from rlvr.distributed.launcher import rank_of_many
from rlvr.errors import StepAbandoned
from rlvr.lifeline import stop_watching_parent

SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
REPEAT_S = 1.0


class StopFlag:
    """Set by the first Ctrl-C / SIGTERM or by a caller: finish the current step, save, return. `signal` is the
    signal that set it (None when a caller did)."""

    def __init__(self) -> None:
        self.stop_requested = False
        self.requested_at = 0.0
        self.signal: signal.Signals | None = None

    def request_stop(self, by: signal.Signals | None = None) -> None:
        if not self.stop_requested:
            self.requested_at, self.signal = time.monotonic(), by
        self.stop_requested = True


def exit_code(summary: dict[str, Any]) -> int:
    """The exit code of a command whose run ended with `summary`: 128 + the signal's number when a signal stopped
    it (130 for Ctrl-C, 143 for SIGTERM), as the shell's convention has it, so that `rlvr train ... && rlvr eval
    ...` stops there; 0 when the run ended or a caller stopped it, and on a rank that torchrun started (torchrun,
    which the signal ended, has the launcher say it: rlvr.distributed.launcher.relaunch).

    >>> exit_code({"stopped_at": 3, "stopped_by": "SIGTERM"}), exit_code({"stopped_at": 3, "stopped_by": None})
    (143, 0)
    """
    by = summary.get("stopped_by")
    if by is None or rank_of_many() is not None:
        return 0
    return 128 + next(int(s) for s, name in SIGNALS.items() if name == by)


@contextmanager
def stop_on_signals(flag: StopFlag, distributed: bool = False) -> Iterator[None]:
    """Within the block, the first SIGINT or SIGTERM sets `flag`; a second one raises KeyboardInterrupt at once.
    One process gives the step up on a signal while a user's code runs; a rank of several (`distributed`)
    finishes it, since the others wait for it at its end, and can save only if every rank gets there."""

    def handler(signum: int, frame: FrameType | None) -> None:
        call, name = deadline.running(), SIGNALS.get(signal.Signals(signum), "signal")
        if flag.stop_requested:
            if time.monotonic() - flag.requested_at < REPEAT_S:
                return  # the same request, delivered twice (directly and through torchrun)
            if call is not None:  # the user's code must end too, whatever it does with the interruption
                deadline.abandon(call, f"{name} twice", signum, raises=KeyboardInterrupt)
            raise KeyboardInterrupt
        flag.request_stop(signal.Signals(signum))
        stop_watching_parent()  # (a dying parent signals once per reparenting: only the first is a request)
        # a user's code may never return: give the step up, not wait (but not a step already taken, whose
        # weights are being pushed to the sampler: that call is bounded, and the step is then whole)
        if call is not None and not distributed and not call.finish_on_stop:
            tqdm.write(f"{name}: abandoning this step ({call.name} was running) and saving a checkpoint")
            deadline.abandon(call, f"{name} gave the step up", signum)
            raise StepAbandoned
        if not distributed:  # a user's call that starts before the step ends gives it up too
            deadline.stop_between(f"{name} gave the step up", signum)
        # a rank cannot tell whether the others are all there: one killed (SIGKILL) leaves nobody to save with
        save = ", then saving a checkpoint if every rank gets there" if distributed else " and saving a checkpoint"
        tqdm.write(f"{name}: finishing this step{save} ({name} again to abort without saving)")

    previous = {}
    try:
        for signum in SIGNALS:
            previous[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread: no handler, the signals behave as usual
        pass
    try:
        yield
    finally:
        deadline.stop_between(None)
        for signum, old in previous.items():
            signal.signal(signum, old)
