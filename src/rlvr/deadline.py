"""Calls into a user's code that must end: a time limit on each, and Ctrl-C or SIGTERM that work while one runs.

A user's reward function runs on the calling (main) thread, as TRL runs it: it may rely on being there
(math-verify's timeouts use signal.alarm). An environment's methods run on worker threads
(rlvr.envs.rollout), and the main thread waits for them here. While such a call or wait lasts it is
`running()`, which tells the training loop's signal handler (rlvr.run.stop) that the step may never
finish on its own: Ctrl-C or SIGTERM then gives the step up at once (`abandon`) instead of waiting.

A call past its limit, or given up on a signal, is stopped in three stages:

1. a watchdog thread sends SIGNAL to the main thread, whose handler raises TimeLimitReached (or
   StepAbandoned) inside the function: that interrupts a `sleep`, a blocked socket read or a Python loop.
   A private signal, not SIGINT: a function may ignore SIGINT (SIG_IGN), and the user's Ctrl-C stays theirs;
2. a function that swallows the interruption (a bare `except:` around each completion) is interrupted
   again every REPEAT_S until it returns; it then ends the step with one line naming it and the setting;
3. a call still running ESCALATE_S after the first interruption (it swallows every one, or is stuck
   in C code that never returns to Python) cannot be stopped from inside the process: the process
   ends there, with one line saying so and what was kept (`exit_note`: the run's last checkpoint).

A user's function that changes the SIGINT or SIGTERM handler (to SIG_IGN, say) has it put back when it
returns, so that Ctrl-C keeps working for the rest of the run.
"""

from __future__ import annotations

import math
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from rlvr.errors import StepAbandoned, UserError

SIGNAL = signal.SIGUSR2  # how the watchdog interrupts the main thread
REPEAT_S = 0.25  # between two interruptions of a call that swallows them
ESCALATE_S = 10.0  # after the first interruption, how long a call may go on before the process ends
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TimeLimitReached(BaseException):
    """Raised inside a user's function when its time limit passes; not an Exception, so that `except
    Exception` in the function lets it through."""


@dataclass
class UserCall:
    """A user's call in progress on the main thread (or the main thread waiting for one)."""

    name: str  # how messages name it: "reward function 'mine:f'", "environment Game.step()"
    seconds: float  # its limit; 0 = none
    setting: str  # the setting that holds the limit: "rewards[].timeout_s"
    due: float  # when the watchdog next interrupts it (time.monotonic; inf = never)
    raises: type[BaseException] = TimeLimitReached  # what an interruption raises in it
    interruptions: int = 0
    give_up_at: float = math.inf  # when the process ends if the call is still running
    finish_on_stop: bool = False  # a first Ctrl-C / SIGTERM lets it finish (rlvr.run.stop): a bounded engine call
    done: bool = False
    why: str = ""  # what the interruptions are for, in the last line: "its time limit of 5 s passed"
    signum: int = signal.SIGINT  # the stop signal it was given up for: the process's exit code is 128 + it

    @property
    def expired(self) -> bool:
        """Whether the time limit passed while it ran."""
        return self.interruptions > 0 and self.raises is TimeLimitReached


_current: UserCall | None = None
_elsewhere: dict[int, UserCall] = {}  # the user's calls in progress off the main thread, by thread
_changed = threading.Condition()  # held while _current or its `due` changes; the watchdog waits on it
_watchdog: threading.Thread | None = None
_exit_notes: list[Callable[[], str]] = []
_stop: tuple[str, int] | None = None  # a stop signal that came while no call ran: why, and the signal (stop_between)


def running() -> UserCall | None:
    """The user's call in progress on the main thread, if any."""
    return _current


def call_with_time_limit(name: str, fn: Callable[..., Any], kwargs: dict[str, Any], seconds: float | None,
                         setting: str = "rewards[].timeout_s", started: float | None = None,
                         finish_on_stop: bool = False) -> Any:
    """`fn(**kwargs)`, stopped with a UserError naming `name` and `setting` if it runs longer than `seconds`
    (None or 0: no limit, but still `running()`, so that Ctrl-C can give the step up); `started`: when the
    time began to count (time.monotonic; now by default). Off the main thread, where nothing can interrupt
    it, a plain call that `overdue_in` reports once it is past its limit (to the main thread waiting
    for that thread: the trainer waiting for the worker sampling ahead). `finish_on_stop`: a first stop signal
    does not give it up (the weight push after an update: giving it up would lose a step already taken)."""
    global _current
    start = time.monotonic() if started is None else started
    call = UserCall(name, seconds or 0.0, setting, due=start + seconds if seconds else math.inf,
                    finish_on_stop=finish_on_stop)
    if threading.current_thread() is not threading.main_thread():
        thread = threading.get_ident()
        outer = _elsewhere.get(thread)
        _elsewhere[thread] = call
        try:
            return fn(**kwargs)
        finally:
            if outer is None:
                _elsewhere.pop(thread, None)
            else:
                _elsewhere[thread] = outer
    _start_watchdog()
    previous, handlers = _current, {s: signal.getsignal(s) for s in STOP_SIGNALS}
    with _changed:
        _current = call
        _changed.notify()
    if _stop is not None and not finish_on_stop:
        abandon(call, *_stop)  # (interrupted REPEAT_S from now, if it has not returned by then)
    result, own = None, False
    try:
        result = fn(**kwargs)
    except TimeLimitReached:
        pass  # (reported below)
    except KeyboardInterrupt:  # (StepAbandoned too)
        # the run's Ctrl-C or SIGTERM gives the call up (abandon) or, with no run's handler, raises it itself:
        # anything else is the function's own raise
        if call.why or signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            if previous is not None:  # (a call within another: the outer one is given up with it)
                previous.why = previous.why or call.why
            raise
        own = True
    finally:
        with _changed:
            call.done, _current = True, previous
            _changed.notify()  # an outer call, if any, is watched again
        for signum, handler in handlers.items():  # a function that set SIGINT to SIG_IGN does not keep it so
            if signal.getsignal(signum) is not handler and handler is not None:
                signal.signal(signum, handler)
    if own:
        raise _OwnInterrupt
    if call.expired:
        raise UserError(f"{name} did not return within its time limit of {seconds:g} s "
                        f"(make it faster, or raise {setting}; 0 = no limit)")
    return result


def call_user(name: str, fn: Callable[[], Any], seconds: float | None, setting: str, fix: str,
              started: float | None = None) -> Any:
    """`fn()`, a user's function named `name`, under the one contract every user function runs under (rewards,
    environments, policy losses, advantage functions): past its time limit `seconds` (the `setting`; None or 0:
    none) it is stopped and named; Ctrl-C or SIGTERM while it runs gives the step up (call_with_time_limit);
    sys.exit in it, or a KeyboardInterrupt it raises itself, is one line naming it and the `fix` (the process and
    the user's Ctrl-C stay the run's). Its other exceptions are the caller's to word."""
    try:
        return call_with_time_limit(name, fn, {}, seconds, setting, started=started)
    except SystemExit as e:
        raise UserError(f"{name} called sys.exit({e.code!r}) ({fix})") from None
    except _OwnInterrupt:
        raise UserError(f"{name} raised KeyboardInterrupt itself: a run is stopped by Ctrl-C, not by its "
                        f"functions ({fix})") from None


class _OwnInterrupt(Exception):
    """A KeyboardInterrupt that a user's function raised itself, while a run's signal handler was in place."""


def overdue_in(thread: threading.Thread) -> UserCall | None:
    """The user's call on `thread` (not the main thread) if it has run past its time limit: nothing can
    interrupt it there, so whoever waits for that thread stops waiting and says so."""
    call = _elsewhere.get(thread.ident or -1)
    return call if call is not None and time.monotonic() > call.due else None


def abandon(call: UserCall, why: str, signum: int, raises: type[BaseException] = StepAbandoned) -> None:
    """Give `call` up (for the signal `signum`, Ctrl-C or SIGTERM; `why` says so): it is interrupted with
    `raises` from now on, again until it returns, and the process ends if it has not within ESCALATE_S."""
    with _changed:
        if call.done:
            return
        call.raises, call.why, call.signum = raises, why, signum
        call.due = time.monotonic() + REPEAT_S  # (the signal handler raises the first one itself)
        call.interruptions, call.give_up_at = 1, time.monotonic() + ESCALATE_S
        _changed.notify()


def stop_between(why: str | None, signum: int = signal.SIGINT) -> None:
    """A stop signal (`signum`) came between the user's calls of a step that is given up on one: each call that
    starts from now on is given up as if the signal had come while it ran (`abandon`, for `why`), but only
    REPEAT_S after it started, so that a call that returns at once still does. Without it, a signal just
    before a call that never returns would have the step wait for it for ever. None: the stop is over."""
    global _stop
    _stop = None if why is None else (why, signum)


@contextmanager
def exit_note(note: Callable[[], str]) -> Iterator[None]:
    """Within the block, the last line of a process ended by stage 3 ends with `note()` (e.g. which
    checkpoint is kept and how to continue)."""
    _exit_notes.append(note)
    try:
        yield
    finally:
        _exit_notes.remove(note)


def _start_watchdog() -> None:
    global _watchdog
    if _watchdog is not None and _watchdog.is_alive():
        return
    signal.signal(SIGNAL, _interrupt)  # installed once, for good: a late signal must never find no handler
    _watchdog = threading.Thread(target=_watch, name="rlvr-deadline", daemon=True)
    _watchdog.start()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGNAL's handler, on the main thread: raise in the user's call, unless it has ended or this module's
    own bookkeeping is running (the watchdog tries again REPEAT_S later)."""
    call = _current
    if call is None or call.done or call.interruptions == 0:
        return
    if frame is not None and frame.f_code.co_filename == __file__:
        return
    raise call.raises


def _watch() -> None:
    """The watchdog thread: interrupt the current call when it is due, again while it runs, then give up."""
    while True:
        with _changed:
            call = _current
            due = math.inf if call is None or call.done else call.due
            wait = None if math.isinf(due) else max(0.0, due - time.monotonic())
            _changed.wait(wait)
            call, now = _current, time.monotonic()
            if call is None or call.done or now < call.due:
                continue
            if now >= call.give_up_at:
                _end_process(call)
            if call.interruptions == 0:
                call.give_up_at = now + ESCALATE_S
                call.why = call.why or f"its time limit of {call.seconds:g} s ({call.setting}) passed"
            call.interruptions += 1
            call.due = now + REPEAT_S
            signal.pthread_kill(threading.main_thread().ident, SIGNAL)  # type: ignore[arg-type]


def _end_process(call: UserCall) -> None:
    """Stage 3: one line, then the process ends (a time limit's code 2, a stop signal's 128 + its number)."""
    notes = "; ".join(note() for note in _exit_notes)
    # (on a line of its own: a progress bar may be at the end of the last one)
    sys.stderr.write(f"\nrlvr: error: {call.name} did not stop when interrupted ({call.why}; it catches the "
                     "interruption, or is stuck outside Python): the process ends here without finishing the step"
                     f"{'; ' + notes if notes else ''}\n")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(2 if call.expired else 128 + call.signum)


class DaemonPool:
    """Worker threads for calls that may never return (an environment's step): unlike ThreadPoolExecutor's,
    they are daemons and nobody joins them, so a call stuck for ever never keeps the process from ending.
    As in ThreadPoolExecutor, a call finding no idle thread starts one (up to `workers`), which runs it at once.

    >>> pool = DaemonPool(2)
    >>> pool.submit(pow, 2, 10).result()
    1024
    >>> pool.close()
    """

    def __init__(self, workers: int) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = \
            queue.SimpleQueue()
        self._workers, self._started = max(1, workers), 0
        self._idle = threading.Semaphore(0)  # one release per thread waiting for a job

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((future, fn, args))
        if not self._idle.acquire(blocking=False) and self._started < self._workers:
            self._started += 1
            threading.Thread(target=self._work, name=f"rlvr-call-{self._started}", daemon=True).start()
        return future

    def close(self) -> None:
        """No more calls: idle threads end; busy ones end when their call returns, if it ever does."""
        for _ in range(self._started):
            self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as e:  # SystemExit too: the caller reports it (a thread cannot end the process)
                    future.set_exception(e)
            self._idle.release()
