"""One engine thread for every live rollout: requests queue up and each sampler call takes all that wait, so
agents that call the endpoint one at a time still decode in batches."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future

from rlvr.rollout import SamplingParams
from rlvr.samplers.protocol import Job, Sampled, Sampler

CLOSED = "the endpoint has closed: the rollouts it served are over"


class Batcher:
    """`submit(jobs)` -> a Future of their completions, drawn by `sampler.complete` under `params` (each job's own
    budget) on this object's thread, together with whatever else is waiting."""

    def __init__(self, sampler: Sampler, params: SamplingParams) -> None:
        self.sampler, self.params = sampler, params
        self._waiting: queue.SimpleQueue[tuple[Sequence[Job], Future[list[Sampled]]] | None] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name="rlvr-harness-batcher", daemon=True)
        self._thread.start()

    def submit(self, jobs: Sequence[Job]) -> Future[list[Sampled]]:
        future: Future[list[Sampled]] = Future()
        with self._lock:
            if self._closed:  # (a late call of an agent whose rollout was given up: nothing will serve it)
                future.set_exception(Closed(CLOSED))
            else:
                self._waiting.put((jobs, future))
        return future

    def close(self, wait_s: float = 600.0) -> None:
        """Stop after the engine call under way, and wait for it (up to `wait_s`): a process must not end while
        this thread is inside the engine (its C++ threads abort the exit). Requests still waiting are refused."""
        with self._lock:
            self._closed = True
            self._waiting.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(wait_s)

    def _work(self) -> None:
        while (first := self._waiting.get()) is not None:
            batch = [first]
            while (more := self._next()) is not None:
                batch.append(more)
            self._draw(batch)
        while (left := self._next()) is not None:
            left[1].set_exception(Closed(CLOSED))

    def _next(self) -> tuple[Sequence[Job], Future[list[Sampled]]] | None:
        """The next waiting request, or None when there is none or the endpoint is closing (the marker kept)."""
        try:
            more = self._waiting.get_nowait()
        except queue.Empty:
            return None
        if more is None:
            self._waiting.put(None)
        return more

    def _draw(self, batch: list[tuple[Sequence[Job], Future[list[Sampled]]]]) -> None:
        """The batch's completions in one engine call; when that fails and the batch holds several requests, each
        is drawn alone (every job carries its own seed: the same draws), so one bad request (a prompt the engine
        refuses) fails itself and not the others waiting with it."""
        jobs = [job for asked, _ in batch for job in asked]
        try:
            done = self.sampler.complete(jobs, self.params)
        except BaseException as e:  # the endpoint answers each request that heard of it with an error
            if len(batch) == 1:
                batch[0][1].set_exception(e)
            else:
                for one in batch:
                    self._draw([one])
            return
        start = 0
        for asked, future in batch:
            future.set_result(done[start:start + len(asked)])
            start += len(asked)


class Closed(Exception):
    """A request reached the batcher after it closed."""
