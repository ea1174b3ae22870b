r"""Worker processes that put a hard wall-clock bound on each symbolic maths comparison.

math-verify hands answers to sympy, which can run for minutes, often inside C code; math-verify's
own timeout uses signal.alarm, which works on the main thread only and cannot interrupt C code.
A process can always be killed, so the maths rewards send their symbolic step here:

- `WorkerPool` keeps a few long-lived worker processes that import sympy once. Each is a fresh
  interpreter (``python -c``, the "spawn" way), never a fork: forking a trainer whose torch threads
  hold locks can deadlock the child. Not multiprocessing's spawn or forkserver either: both re-run
  the user's main script in every child unless it has an ``if __name__ == "__main__"`` guard, so a
  training script without one would start training again inside each worker.
- `run_many` hands items out one per idle worker and waits on all of them at once. An item not
  answered within `timeout_s` of being handed out gets its worker killed and replaced (about a
  second to start, which never counts against an item); its result is None and `stats()` counts it.
- The shared pool behind `run_shared` (the maths rewards' `match_many` / `parses_many`) starts on
  first use, is reused across calls and threads (one batch at a time), and stops at exit. If it
  cannot start, the items run in this process with symbolic.py's guards only (no hard bound),
  after one warning.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import Any

from rlvr.rewards import symbolic

DEFAULT_TIMEOUT_S = 2.0  # per item, from the moment a worker receives it
DEFAULT_WORKERS = max(1, min(4, os.cpu_count() or 1))
DEFAULT_MEMORY_MB = 4096  # address-space cap per worker: sympy can also fill memory within the bound
STARTUP_TIMEOUT_S = 60.0  # importing sympy on a busy machine: generous, and it never counts per item


@dataclass
class PoolStats:
    """What the workers did since they started; the number to watch in a training log is `timeouts`."""

    items: int = 0  # items run, in workers or in-process
    timeouts: int = 0  # items past their bound: worker killed and replaced, result None (no match)
    failures: int = 0  # items that raised (e.g. MemoryError) or whose worker died: result None
    restarts: int = 0  # workers replaced after a timeout or a death
    in_process: int = 0  # items run in this process because the pool could not start
    last_problem: str = ""  # the latest timeout or failure and the start of its item


@dataclass(eq=False)  # compared by identity: workers are dict keys while busy
class _Worker:
    process: subprocess.Popen[bytes]
    send: Connection  # items to the worker
    receive: Connection  # results from it; end-of-file when it dies
    started: float
    ready: bool = False


@dataclass(eq=False)
class _Batch:
    """One `run_many` call in progress."""

    fn: Callable[..., Any]
    items: list[tuple[Any, ...]]
    timeout_s: float
    results: list[Any] = field(default_factory=list)
    todo: deque[int] = field(default_factory=deque)
    busy: dict[_Worker, tuple[int, float]] = field(default_factory=dict)  # worker -> (item, deadline)


class PoolUnavailable(RuntimeError):
    """The worker processes could not start (no usable start method, or none became ready)."""


class WorkerPool:
    """`size` worker processes running picklable top-level functions, each item under a deadline.

    >>> pool = WorkerPool(size=1)
    >>> pool.run_many(pow, [(2, 10), (3, 2)], timeout_s=5.0)
    [1024, 9]
    >>> pool.close()
    """

    def __init__(self, size: int = DEFAULT_WORKERS, memory_mb: int | None = DEFAULT_MEMORY_MB) -> None:
        if os.name != "posix":
            raise PoolUnavailable("worker processes need POSIX pipes")
        self._memory_mb = memory_mb
        self._lock = threading.Lock()  # one batch at a time; other threads wait their turn
        self.stats = PoolStats()
        self._workers: list[_Worker] = []
        try:
            for _ in range(max(1, size)):
                self._workers.append(self._start())
        except BaseException:
            self.close()
            raise

    def run_many(self, fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], timeout_s: float) -> list[Any]:
        """`[fn(*item) for item in items]` in parallel; None for an item that timed out or failed.

        Raises PoolUnavailable when no worker becomes ready within STARTUP_TIMEOUT_S.
        """
        with self._lock:
            batch = _Batch(fn, list(items), timeout_s, [None] * len(items), deque(range(len(items))))
            while batch.todo or batch.busy:
                self._hand_out(batch)
                self._collect(batch)
            self.stats.items += len(items)
            return batch.results

    def wait_ready(self) -> None:
        """Block until every worker has started, so that the next batch pays no start-up."""
        with self._lock:
            idle = _Batch(abs, [], 0.0)
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while not all(w.ready for w in self._workers):
                self._collect(idle)
                if time.monotonic() > deadline:
                    raise PoolUnavailable(f"the worker processes did not all start within {STARTUP_TIMEOUT_S:g} s")

    def close(self) -> None:
        """Stop every worker now; the pool cannot be used afterwards."""
        for worker in self._workers:
            _stop(worker)
        self._workers = []

    def _start(self) -> _Worker:
        to_worker, from_worker = os.pipe(), os.pipe()  # (read end, write end) each
        child_fds = (to_worker[0], from_worker[1])
        code = (
            f"import sys; sys.path[:] = {sys.path!r}; "  # the parent's imports, as multiprocessing does
            f"from rlvr.rewards.workers import serve; serve({child_fds[0]}, {child_fds[1]}, {self._memory_mb!r})"
        )
        try:
            # A session of its own: Ctrl-C in the terminal goes to the trainer, not to the workers.
            process = subprocess.Popen(
                [sys.executable, "-c", code], pass_fds=child_fds, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, start_new_session=True,
            )
        finally:
            for fd in child_fds:  # so that a dead worker reads as end-of-file here
                os.close(fd)
        send = Connection(to_worker[1], readable=False)
        return _Worker(process, send, Connection(from_worker[0], writable=False), time.monotonic())

    def _replace(self, worker: _Worker, problem: str) -> None:
        _stop(worker)
        self._workers[self._workers.index(worker)] = self._start()
        self.stats.restarts += 1
        self.stats.last_problem = problem

    def _hand_out(self, batch: _Batch) -> None:
        for worker in self._workers:
            if not batch.todo:
                return
            if worker.ready and worker not in batch.busy:
                index = batch.todo.popleft()
                try:
                    worker.send.send((batch.fn, batch.items[index]))
                except OSError:  # it died while idle: the item goes to the next worker
                    batch.todo.appendleft(index)
                    self._replace(worker, f"worker exited with code {worker.process.poll()} while idle")
                    continue
                batch.busy[worker] = (index, time.monotonic() + batch.timeout_s)

    def _collect(self, batch: _Batch) -> None:
        """Wait for the first answer, start-up or deadline, then deal with each."""
        waiting = [w for w in self._workers if w in batch.busy or not w.ready]
        deadlines = [d for _, d in batch.busy.values()]
        deadlines += [w.started + STARTUP_TIMEOUT_S for w in waiting if not w.ready]
        for conn in wait([w.receive for w in waiting], timeout=max(0.0, min(deadlines) - time.monotonic())):
            worker = next(w for w in waiting if w.receive is conn)
            self._receive(worker, batch)
        now = time.monotonic()
        for worker, (index, deadline) in list(batch.busy.items()):
            if now >= deadline:
                del batch.busy[worker]
                self.stats.timeouts += 1
                self._replace(worker, f"timeout after {batch.timeout_s:g} s on {_describe(batch.items[index])}")
        stuck = [w for w in self._workers if not w.ready and now > w.started + STARTUP_TIMEOUT_S]
        if stuck and not any(w.ready for w in self._workers):
            raise PoolUnavailable(f"no worker process started within {STARTUP_TIMEOUT_S:g} s")
        for worker in stuck:  # the others work: try this one again
            self._replace(worker, f"worker not started within {STARTUP_TIMEOUT_S:g} s")

    def _receive(self, worker: _Worker, batch: _Batch) -> None:
        died = False
        try:
            ok, value = worker.receive.recv()
        except (EOFError, OSError):  # the worker died: out of memory, a crash in C code
            ok, value, died = False, f"worker exited with code {_exit_code(worker)}", True
            if not worker.ready:  # dying before the first item is the set-up failing, not an item
                raise PoolUnavailable(f"a worker process failed while starting ({value})") from None
        if not worker.ready:
            worker.ready = True
            return
        index, _ = batch.busy.pop(worker)
        if ok:
            batch.results[index] = value
            return
        self.stats.failures += 1
        problem = f"{value} on {_describe(batch.items[index])}"
        if died:
            self._replace(worker, problem)
        else:  # an exception leaves the worker usable (after a MemoryError it exits by itself)
            self.stats.last_problem = problem


def serve(read_fd: int, write_fd: int, memory_mb: int | None) -> None:
    """A worker's main loop: run each ``(fn, args)`` received, send ``(True, result)`` or ``(False, why)``."""
    import resource

    if memory_mb is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    _exit_with_parent()
    # math-verify warns that its timeout is off: here the parent's kill is the timeout.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    receive, send = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    symbolic.warm_up(None)
    send.send((True, "ready"))
    while True:
        try:
            fn, args = receive.recv()
        except EOFError:  # the parent has gone
            return
        try:
            send.send((True, fn(*args)))
        except Exception as e:  # reported to the parent: that item's result is None
            send.send((False, f"{type(e).__name__}: {str(e)[:200]}"))
            if isinstance(e, MemoryError):  # the heap may be half-built: let the parent start a fresh worker
                os._exit(1)


def _exit_with_parent() -> None:
    """A thread that ends this worker once its parent has died, even mid-item (a killed trainer)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _exit_code(worker: _Worker) -> int | None:
    """The exit code of a worker whose pipe just closed (None if it has not exited within a second)."""
    try:
        return worker.process.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        return None


def _stop(worker: _Worker) -> None:
    worker.process.kill()
    worker.process.wait(timeout=5)
    worker.send.close()
    worker.receive.close()


def _describe(item: tuple[Any, ...]) -> str:
    text = repr(item)
    return text if len(text) <= 120 else text[:117] + "..."


# --- the shared pool used by the maths rewards ------------------------------------------------

_shared: WorkerPool | None = None
_shared_failed = False  # the pool could not start once: stay in-process, warn once
_shared_lock = threading.Lock()
_fallback_stats = PoolStats()


def start_shared_pool() -> bool:
    """Start the shared workers now and wait for them (e.g. before training); False: running in-process."""
    pool = _shared_pool()
    if pool is None:
        return False
    try:
        pool.wait_ready()
    except PoolUnavailable as e:
        _fall_back(e)
        return False
    return True


def stats() -> PoolStats:
    """A copy of the shared pool's counters (of the in-process fallback if the pool never started)."""
    with _shared_lock:
        return replace(_shared.stats if _shared is not None else _fallback_stats)


def shutdown() -> None:
    """Stop the shared pool's workers (also run at exit); the next call starts a fresh pool."""
    global _shared
    with _shared_lock:
        if _shared is not None:
            _shared.close()
            _shared = None


def run_shared(fn: Callable[..., Any], items: list[tuple[Any, ...]], timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Any]:
    """`[fn(*item) for item in items]` in the shared worker processes, each item under `timeout_s`
    (None for an item that timed out or failed); in this process when the pool cannot start.
    `fn` is a top-level function taking `alarm_s` (math-verify's own bound, used only in-process)."""
    if not items:
        return []
    pool = _shared_pool()
    if pool is not None:
        try:
            return pool.run_many(fn, items, timeout_s)
        except PoolUnavailable as e:
            _fall_back(e)
    # In-process: math-verify's alarm where it works (main thread), the cheap guards everywhere.
    _fallback_stats.items += len(items)
    _fallback_stats.in_process += len(items)
    return [fn(*item, alarm_s=symbolic.TIMEOUT_S) for item in items]


def _shared_pool() -> WorkerPool | None:
    global _shared
    with _shared_lock:
        if _shared is None and not _shared_failed:
            try:
                _shared = WorkerPool()
            except (OSError, ValueError, RuntimeError) as e:  # PoolUnavailable is a RuntimeError
                _fall_back_locked(e)
        return _shared


def _fall_back(error: Exception) -> None:
    with _shared_lock:
        _fall_back_locked(error)


def _fall_back_locked(error: Exception) -> None:
    global _shared, _shared_failed
    if _shared is not None:
        _shared.close()
        _shared = None
    _shared_failed = True
    warnings.warn(
        f"maths answer checks run in this process, without a hard time bound per item: the worker "
        f"processes could not start ({type(error).__name__}: {error})",
        RuntimeWarning,
        stacklevel=3,
    )


atexit.register(shutdown)
