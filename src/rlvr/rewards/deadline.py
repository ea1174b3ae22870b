"""A time limit on each call of a user's reward function, and Ctrl-C that works while one runs.

A user's function runs on the calling (main) thread, as TRL runs it: it may rely on being there
(math-verify's timeouts use signal.alarm). So it is stopped the way Ctrl-C stops it: when the limit
passes, a timer thread sends SIGINT to the main thread, which interrupts a `sleep`, a blocked socket
read or a Python loop, and the KeyboardInterrupt that comes out of the function is turned into a
one-line error naming the reward and the setting. While a call runs, `running()` tells the training
loop's signal handler (rlvr.run.stop) that the step cannot finish on its own: a user's Ctrl-C or
SIGTERM then abandons the step at once instead of waiting for it.

A function stuck inside C code that never returns to Python (a pathological regex, say) cannot be
interrupted by any of this; only killing the process stops it.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.errors import UserError

SETTING = "rewards[].timeout_s"
_GRACE_SECONDS = 0.5  # how long to wait for the limit's SIGINT after the function returned just in time


@dataclass
class RewardCall:
    """The user's reward function being called now on the main thread."""

    name: str
    seconds: float
    done: bool = False
    expired: bool = False  # the limit passed and the main thread was sent SIGINT


_current: RewardCall | None = None


def running() -> RewardCall | None:
    """The user's reward call in progress on the main thread, if any."""
    return _current


def call_with_time_limit(name: str, fn: Callable[..., Any], kwargs: dict[str, Any], seconds: float | None) -> Any:
    """`fn(**kwargs)`, stopped with a UserError naming `name` if it runs longer than `seconds`.

    On the main thread the call is `running()` while it lasts, limit or not; off it (where no signal
    can reach it), a plain call.
    """
    global _current
    if threading.current_thread() is not threading.main_thread():
        return fn(**kwargs)
    call, lock = RewardCall(name, seconds or 0.0), threading.Lock()

    def expire() -> None:
        with lock:
            if call.done:
                return
            call.expired = True
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # type: ignore[arg-type]

    previous_handler = signal.getsignal(signal.SIGINT)
    if seconds and not callable(previous_handler):  # SIGINT ignored (nohup, `cmd &`): the limit still needs it
        signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(seconds or 0.0, expire)
    timer.daemon = True
    previous_call, _current = _current, call
    if seconds:
        timer.start()
    try:
        try:
            result = fn(**kwargs)
        finally:
            with lock:
                call.done = True
            timer.cancel()
            if call.expired:  # the SIGINT is on its way: take it here, not in whatever runs next
                end = time.monotonic() + _GRACE_SECONDS
                while time.monotonic() < end:
                    time.sleep(0.01)
    except KeyboardInterrupt:
        if not call.expired:
            raise  # the user's own Ctrl-C
    finally:
        _current = previous_call
        if seconds and not callable(previous_handler):
            signal.signal(signal.SIGINT, previous_handler)
    if call.expired:
        raise UserError(f"reward function '{name}' did not return within its time limit of {seconds:g} s "
                        f"(make it faster, or raise {SETTING}; 0 = no limit)")
    return result
