"""Async reward functions (`async def`, as TRL's GRPOTrainer takes them): their coroutines run on one event loop
kept on a daemon thread of its own, as TRL keeps one, so that an async client or semaphore a reward keeps between
calls stays on the loop it was made on, and the caller's thread (a notebook's runs a loop already) is left alone.
The caller waits in short slices, so that a time limit or Ctrl-C reaches it there (rlvr.deadline) and cancels the
coroutine instead of leaving it to run."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import threading
from typing import Any

_loop: tuple[int, asyncio.AbstractEventLoop] | None = None  # (the process it runs in, the loop)
_made = threading.Lock()
WAIT_SLICE_S = 0.05


def awaited(value: Any) -> Any:
    """A reward's value; an async reward's coroutine run to its end on the rewards' event loop.

    >>> async def later(completions, **kwargs):
    ...     return [1.0 for _ in completions]
    >>> awaited(later(["a", "b"])), awaited([0.5])
    ([1.0, 1.0], [0.5])
    """
    if not inspect.isawaitable(value):
        return value

    async def result() -> Any:
        return await value

    future = asyncio.run_coroutine_threadsafe(result(), _rewards_loop())
    try:
        while True:
            try:
                return future.result(timeout=WAIT_SLICE_S)
            except concurrent.futures.TimeoutError:
                continue
    except BaseException:  # (a time limit, Ctrl-C: the coroutine is cancelled, not left running)
        future.cancel()
        raise


def _rewards_loop() -> asyncio.AbstractEventLoop:
    """The event loop of this process's async rewards (a forked child makes its own: threads do not fork)."""
    global _loop
    with _made:
        if _loop is None or _loop[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="async-rewards", daemon=True).start()
            _loop = (os.getpid(), loop)
        return _loop[1]
