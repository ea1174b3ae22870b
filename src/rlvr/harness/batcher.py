"""One engine thread for every live rollout: requests queue up and each sampler call takes all that wait, so
agents that call the endpoint one at a time still decode in batches."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future

from rlvr.rollout import SamplingParams
from rlvr.samplers.protocol import Job, Sampled, Sampler


class Batcher:
    """`submit(jobs)` -> a Future of their completions, drawn by `sampler.complete` under `params` (each job's own
    budget) on this object's thread, together with whatever else is waiting."""

    def __init__(self, sampler: Sampler, params: SamplingParams) -> None:
        self.sampler, self.params = sampler, params
        self._waiting: queue.SimpleQueue[tuple[Sequence[Job], Future[list[Sampled]]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="rlvr-harness-batcher", daemon=True)
        self._thread.start()

    def submit(self, jobs: Sequence[Job]) -> Future[list[Sampled]]:
        future: Future[list[Sampled]] = Future()
        self._waiting.put((jobs, future))
        return future

    def close(self, wait_s: float = 600.0) -> None:
        """Stop after the engine call under way, and wait for it (up to `wait_s`): a process must not end while
        this thread is inside the engine (its C++ threads abort the exit)."""
        self._waiting.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(wait_s)

    def _work(self) -> None:
        while (first := self._waiting.get()) is not None:
            batch = [first]
            while True:
                try:
                    more = self._waiting.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._waiting.put(None)  # (close after this batch)
                    break
                batch.append(more)
            jobs = [job for asked, _ in batch for job in asked]
            try:
                done = self.sampler.complete(jobs, self.params)
            except BaseException as e:  # every waiting request hears of it (the endpoint answers each with an error)
                for _, future in batch:
                    future.set_exception(e)
                continue
            start = 0
            for asked, future in batch:
                future.set_result(done[start:start + len(asked)])
                start += len(asked)
