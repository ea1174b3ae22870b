"""Worker pool: each item under a hard wall-clock bound, kill and replace, fallback in-process.

The slow items are real: ``pow(3, 10**9)`` is one C call that holds the GIL (no alarm or thread
can stop it), and the maths pair below keeps sympy busy for over 30 s on this machine.
"""

import os
import threading
import time
import warnings

import pytest

from rlvr.rewards import math, workers
from rlvr.rewards.workers import PoolUnavailable, WorkerPool

BOUND_S = 1.0  # per item in these tests (the default is 2 s)
SLACK_S = 1.0  # what a bound may overrun by: killing, the next item, a busy 2-core machine
SLOW_PAIR = ("(x+1)^{999}(x+2)^{999}", "(x+3)^{999}")  # passes every cheap guard, then sympy expands


@pytest.fixture(scope="module")
def pool():
    pool = WorkerPool(size=2)
    pool.wait_ready()  # start-up (importing sympy) is outside every timed region below
    yield pool
    pool.close()


@pytest.fixture(scope="module", autouse=True)
def shared_pool_started():
    assert workers.start_shared_pool()


def test_results_come_back_in_item_order(pool):
    assert pool.run_many(pow, [(2, 10), (3, 2), (5, 0)], timeout_s=5.0) == [1024, 9, 1]
    assert pool.run_many(pow, [], timeout_s=5.0) == []


def test_items_run_in_parallel(pool):
    start = time.perf_counter()
    pool.run_many(time.sleep, [(0.4,), (0.4,)], timeout_s=5.0)
    assert time.perf_counter() - start < 0.75  # one after the other would take 0.8 s


def test_item_past_its_bound_is_killed_and_its_worker_replaced(pool):
    before = pool.stats.timeouts, pool.stats.restarts
    start = time.perf_counter()
    results = pool.run_many(pow, [(3, 10**9), (2, 10)], timeout_s=BOUND_S)
    assert time.perf_counter() - start < BOUND_S + SLACK_S
    assert results == [None, 1024]
    assert (pool.stats.timeouts, pool.stats.restarts) == (before[0] + 1, before[1] + 1)
    assert "timeout after 1 s on (3, 1000000000)" in pool.stats.last_problem
    pool.wait_ready()
    assert pool.run_many(pow, [(2, 3), (2, 4)], timeout_s=5.0) == [8, 16]  # both workers serve again


def test_worker_that_dies_mid_item_is_replaced(pool):
    failures, restarts = pool.stats.failures, pool.stats.restarts
    assert pool.run_many(os._exit, [(3,)], timeout_s=5.0) == [None]
    assert (pool.stats.failures, pool.stats.restarts) == (failures + 1, restarts + 1)
    assert pool.stats.last_problem == "worker exited with code 3 on (3,)"
    assert pool.run_many(pow, [(2, 5)], timeout_s=5.0) == [32]


def test_exception_in_an_item_is_none_for_that_item_only(pool):
    restarts = pool.stats.restarts
    assert pool.run_many(int, [("x",), ("5",)], timeout_s=5.0) == [None, 5]
    assert "ValueError" in pool.stats.last_problem
    assert pool.stats.restarts == restarts  # an exception does not cost a new worker


def test_workers_that_cannot_start_raise_pool_unavailable():
    broken = WorkerPool(size=1, memory_mb=16)  # too little memory to start Python at all
    try:
        with pytest.raises(PoolUnavailable, match="failed while starting"):
            broken.run_many(pow, [(2, 2)], timeout_s=5.0)
    finally:
        broken.close()


def test_shared_pool_falls_back_in_process_with_one_warning(monkeypatch):
    def cannot_start(*args, **kwargs):
        raise OSError("no processes here")

    monkeypatch.setattr(workers, "WorkerPool", cannot_start)
    monkeypatch.setattr(workers, "_shared", None)
    monkeypatch.setattr(workers, "_shared_failed", False)
    monkeypatch.setattr(workers, "_fallback_stats", workers.PoolStats())
    with pytest.warns(RuntimeWarning, match="without a hard time bound.*no processes here"):
        assert math.match_many([("0.5", r"\frac{1}{2}"), ("x = 2", "y = 3")]) == [True, False]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once, not on every call
        assert math.parses_many([r"\frac{"]) == [False]
    assert workers.stats().in_process == 3


def test_shared_match_many_bounds_a_slow_pair():
    before = workers.stats().timeouts
    start = time.perf_counter()
    assert math.match_many([SLOW_PAIR, ("1/2", "0.5")], timeout_s=BOUND_S) == [None, True]
    assert time.perf_counter() - start < BOUND_S + SLACK_S
    assert workers.stats().timeouts == before + 1


def test_bound_holds_off_the_main_thread():
    # math-verify's own timeout (signal.alarm) does nothing here: only the kill can stop sympy.
    outcome = {}

    def score():
        start = time.perf_counter()
        outcome["result"] = math.match_many([SLOW_PAIR], timeout_s=BOUND_S)
        outcome["seconds"] = time.perf_counter() - start

    thread = threading.Thread(target=score)
    thread.start()
    thread.join(timeout=30)
    assert outcome["result"] == [None]
    assert outcome["seconds"] < BOUND_S + SLACK_S


def test_threads_share_the_pool_one_batch_at_a_time():
    results = [None] * 4

    def score(i):
        results[i] = math.match_many([(r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}"), (str(i), "1")])

    threads = [threading.Thread(target=score, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert results == [[True, False], [True, True], [True, False], [True, False]]
