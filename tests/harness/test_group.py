"""rlvr.harness.group: G agent runs against the endpoint, their rows, rewards and failures, under a deadline."""

import time

import pytest

from rlvr.harness import Endpoint
from rlvr.harness.group import run_group
from rlvr.models import build_tiny_model
from rlvr.rollout import SamplingParams

from .conftest import serve_tiny

PARAMS = SamplingParams(8, temperature=1.0)
ROW = {"question": "What is 2 + 2?", "answer": "4"}


@pytest.fixture
def endpoint():
    served = serve_tiny(PARAMS)
    yield served
    served.close()


def guesser(link, row):
    """A two-turn agent with feedback: asks, answers back as a user, asks again; scores its last answer's length."""
    messages = [{"role": "user", "content": row["question"]}]
    first = link.chat(messages)["choices"][0]["message"]
    messages += [first, {"role": "user", "content": "Are you sure?"}]
    second = link.chat(messages)["choices"][0]["message"]
    return len(second["content"]) / 10, {"turns": 2.0}


async def asking_once(link, row):
    return float(bool(link.chat([{"role": "user", "content": row["question"]}])["choices"]))


def test_each_run_is_a_rollout_of_its_own_seed_and_its_turns_make_one_row(endpoint):
    rollouts = run_group(endpoint, guesser, ROW, seeds=[1, 2, 3], timeout_s=60)
    assert len(rollouts) == 3 and all(r.error is None and r.metrics == {"turns": 2.0} for r in rollouts)
    assert all(len(r.rows) == 1 and r.rows[0].turns == 2 for r in rollouts)  # (the second turn spliced onto the first)
    assert len({tuple(r.rows[0].ids) for r in rollouts}) == 3  # (three seeds, three conversations)
    again = run_group(endpoint, guesser, ROW, seeds=[1, 2, 3], timeout_s=60)
    assert [r.rows[0].ids for r in again] == [r.rows[0].ids for r in rollouts] and \
        [r.reward for r in again] == [r.reward for r in rollouts]
    assert run_group(endpoint, asking_once, ROW, seeds=[4], timeout_s=60)[0].reward == 1.0  # (an async agent)


def test_an_agent_that_raises_hangs_or_returns_nonsense_leaves_its_rollout_unscored(endpoint):
    calls = {"late": []}

    def flaky(link, row):
        link.chat([{"role": "user", "content": "hi"}])
        if row["kind"] == "raise":
            raise ConnectionError("the tool server is down")
        if row["kind"] == "hang":
            time.sleep(3)
            try:
                link.chat([{"role": "user", "content": "still there?"}])
            except Exception as e:
                calls["late"].append(str(e))
            return 1.0
        return {"kind": "reward"} if row["kind"] == "nonsense" else float("nan")

    started = time.monotonic()
    raised, = run_group(endpoint, flaky, {"kind": "raise"}, seeds=[1], timeout_s=30)
    assert raised.reward is None
    assert raised.error == "the agent function raised ConnectionError: the tool server is down"
    assert raised.rows and raised.rows[0].turns == 1  # (what it was served is kept)
    hung, = run_group(endpoint, flaky, {"kind": "hang"}, seeds=[1], timeout_s=1)
    assert hung.reward is None and "did not return within environment.timeout_s=1 s" in hung.error
    assert time.monotonic() - started < 10
    time.sleep(3)
    assert calls["late"] and "410" in calls["late"][0]  # (its key was revoked: a late call is refused)
    nonsense, = run_group(endpoint, flaky, {"kind": "nonsense"}, seeds=[1], timeout_s=30)
    assert nonsense.reward is None and "returned dict" in nonsense.error
    nan, = run_group(endpoint, flaky, {"kind": "nan"}, seeds=[1], timeout_s=30)
    assert nan.reward is None and nan.error is None  # (NaN: unscored, as a reward's None)
    silent, = run_group(endpoint, lambda link, row: 1.0, {}, seeds=[1], timeout_s=30)
    assert silent.reward is None and silent.error == "the agent function never called the endpoint: nothing to train on"


def test_every_rollout_of_a_large_step_connects_at_once_without_a_reset(endpoint):
    """A step's rollouts start together: the server's listen backlog holds them all (the default of 5 reset the
    connections past it, and those rollouts failed)."""
    from rlvr.harness.group import run_rollouts

    def once(link, row):
        return float(len(link.chat([{"role": "user", "content": "hi"}], max_tokens=1)["choices"]))

    rollouts = run_rollouts(endpoint, once, [(ROW, seed) for seed in range(256)], 8, timeout_s=120)
    assert [r.error for r in rollouts if r.error] == [] and all(r.reward == 1.0 for r in rollouts)


def test_the_time_limit_counts_the_agents_own_time_not_its_wait_for_the_policy():
    """On a slow machine the whole step's decoding is shared: an agent waiting 1.5 s for its answer is not late
    under a limit of 1 s, one that spends 1.5 s itself is."""
    from .test_template import Scripted

    class Slow(Scripted):
        def complete(self, jobs, params):
            time.sleep(1.5)
            return super().complete(jobs, params)

    tokenizer = build_tiny_model(seed=0)[1]
    served = Endpoint(Slow(tokenizer, "ok"), tokenizer, PARAMS)

    def waits(link, row):
        return float(len(link.chat([{"role": "user", "content": "hi"}])["choices"]))

    def dawdles(link, row):
        link.chat([{"role": "user", "content": "hi"}])
        time.sleep(1.5)
        return 1.0

    try:
        assert [r.reward for r in run_group(served, waits, ROW, seeds=[1, 2], timeout_s=1)] == [1.0, 1.0]
        late = run_group(served, dawdles, ROW, seeds=[3], timeout_s=1)[0]
        assert late.reward is None and "within environment.timeout_s=1 s of its own time" in late.error
    finally:
        served.close()
