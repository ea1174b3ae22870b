"""rlvr.harness.batcher.Batcher: requests that wait together are drawn in one engine call; one the engine refuses
fails alone; a request after closing is refused at once, never left waiting."""

import threading
import time

import pytest

from rlvr.harness.batcher import Batcher, Closed
from rlvr.rollout import SamplingParams
from rlvr.samplers import Job
from rlvr.samplers.protocol import Sampled

POISON = 13  # a token id the fake engine refuses (as vLLM refuses a prompt longer than its context)


class Engine:
    """complete(): each job's draw a function of its seed alone (batch-invariant, like rlvr's samplers); the first
    call waits for `gate`, so that the requests submitted meanwhile wait together."""

    def __init__(self):
        self.gate, self.calls = threading.Event(), []

    def complete(self, jobs, params):
        self.calls.append([job.seed for job in jobs])
        if len(self.calls) == 1:
            assert self.gate.wait(30)
        if any(POISON in job.ids for job in jobs):
            raise ValueError("the prompt is longer than the model's context")
        return [Sampled([job.seed % 7, 1], [-0.5, -0.25], True) for job in jobs]


def test_requests_waiting_together_share_a_call_and_a_refused_one_fails_alone():
    engine = Engine()
    batcher = Batcher(engine, SamplingParams(4))
    try:
        gate = batcher.submit([Job([1], 100, 4)])
        while not engine.calls:  # (the engine holds the first request alone)
            time.sleep(0.01)
        good = batcher.submit([Job([1, 2], 1, 4), Job([1, 2], 2, 4)])
        bad = batcher.submit([Job([POISON], 3, 4)])
        also_good = batcher.submit([Job([5], 4, 4)])
        engine.gate.set()
        assert [s.token_ids for s in gate.result(30)] == [[100 % 7, 1]]
        assert [s.token_ids for s in good.result(30)] == [[1, 1], [2, 1]]
        assert [s.token_ids for s in also_good.result(30)] == [[4, 1]]
        with pytest.raises(ValueError, match="longer than the model's context"):
            bad.result(30)
        assert engine.calls == [[100], [1, 2, 3, 4], [1, 2], [3], [4]]  # together first, then each alone
    finally:
        engine.gate.set()
        batcher.close()


def test_a_request_after_closing_is_refused_at_once():
    engine = Engine()
    engine.gate.set()
    batcher = Batcher(engine, SamplingParams(4))
    assert batcher.submit([Job([1], 1, 4)]).result(30)[0].token_ids == [1, 1]
    batcher.close()
    with pytest.raises(Closed, match="the endpoint has closed"):
        batcher.submit([Job([1], 2, 4)]).result(5)
