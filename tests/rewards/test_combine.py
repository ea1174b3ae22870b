"""compute_rewards: TRL calling convention, weights, None handling, and output validation."""

import math
import time

import numpy as np
import pytest
import torch

from rlvr.errors import UserError
from rlvr.rewards.combine import RewardSpec, compute_rewards
from rlvr.rewards.format import boxed_format
from rlvr.rewards.math import math_accuracy

PROMPTS = ["2+2?", "3+3?", "4+4?"]
COMPLETIONS = [r"\boxed{4}", r"\boxed{7}", "eight"]
IDS = [[1, 2], [3], [4, 5, 6]]


def run(specs, columns=None, completions=COMPLETIONS):
    return compute_rewards(
        specs, prompts=PROMPTS, completions=completions, completion_ids=IDS, columns=columns or {}
    )


def constant(values):
    def reward(completions, **kwargs):
        return list(values)

    return reward


def test_trl_style_function_works_unchanged():
    def f(completions, **kwargs):
        return [float(len(c)) for c in completions]

    result = run([RewardSpec("length", f)])
    assert result.components["length"] == [9.0, 9.0, 5.0]
    assert result.total == [9.0, 9.0, 5.0]


def test_receives_every_trl_keyword_and_column():
    seen = {}

    def spy(prompts, completions, completion_ids, answer, **kwargs):
        seen.update(prompts=prompts, completions=completions, ids=completion_ids, answer=answer, **kwargs)
        return [0.0] * len(completions)

    run([RewardSpec("spy", spy)], columns={"answer": ["4", "6", "8"], "level": [1, 2, 3]})
    assert seen == {
        "prompts": PROMPTS,
        "completions": COMPLETIONS,
        "ids": IDS,
        "answer": ["4", "6", "8"],
        "level": [1, 2, 3],
    }


def test_an_async_reward_is_awaited_with_or_without_a_running_loop_and_keeps_its_loop_between_calls():
    """TRL's GRPOTrainer takes `async def` rewards; so does rlvr, from a notebook's loop too. One loop serves every
    call, so an asyncio object a reward keeps (a rate-limiting semaphore, an async client) works at every step."""
    import asyncio

    limit = []

    async def length(completions, **kwargs):
        limit[:] = limit or [asyncio.Semaphore(1)]  # (bound to the first call's loop when a task waits on it)

        async def one(completion):
            async with limit[0]:
                await asyncio.sleep(0)
                return float(len(completion))

        return list(await asyncio.gather(*(one(c) for c in completions)))

    for _ in range(2):
        assert run([RewardSpec("length", length)]).components["length"] == [9.0, 9.0, 5.0]

    async def in_a_notebook():  # (a running loop on this thread)
        return run([RewardSpec("length", length)]).components["length"]

    assert asyncio.run(in_a_notebook()) == [9.0, 9.0, 5.0]


def test_an_async_reward_past_its_time_limit_is_cancelled():
    import asyncio

    ended = []

    async def stuck(completions, **kwargs):
        try:
            await asyncio.sleep(60)
        finally:
            ended.append(True)

    with pytest.raises(UserError, match="reward function 'stuck'.*time limit"):
        run([RewardSpec("stuck", stuck, timeout_s=0.3)])
    for _ in range(40):
        if ended:
            break
        time.sleep(0.05)
    assert ended == [True]  # cancelled on its loop, not left sleeping


def test_an_async_reward_routed_by_when_and_as_a_verdict():
    from rlvr.rewards.routing import as_verdict, only_where

    async def half(completions, **kwargs):
        return [0.5 for _ in completions]

    routed = only_where(half, {"kind": "maths"}, "half")
    assert routed(completions=["a", "b"], kind=["maths", "code"]) == [0.5, None]
    assert as_verdict(half, 0.5)(completions=["a", "b"]) == [1.0, 1.0]


def test_weighted_sum_of_builtins():
    specs = [RewardSpec("math_accuracy", math_accuracy, 1.0), RewardSpec("boxed_format", boxed_format, 0.1)]
    result = run(specs, columns={"answer": ["4", "6", "8"]})
    assert result.components == {"math_accuracy": [1.0, 0.0, 0.0], "boxed_format": [1.0, 1.0, 0.0]}
    assert result.total == pytest.approx([1.1, 0.1, 0.0])
    assert set(result.seconds) == {"math_accuracy", "boxed_format"}
    assert all(s >= 0.0 for s in result.seconds.values())


def test_none_adds_nothing_and_all_none_totals_zero():
    specs = [
        RewardSpec("a", constant([1.0, None, None]), weight=2.0),
        RewardSpec("b", constant([0.5, 0.5, None]), weight=1.0),
    ]
    result = run(specs)
    assert result.components["a"] == [1.0, None, None]
    assert result.total == [2.5, 0.5, 0.0]


def test_nan_counts_as_none():
    result = run([RewardSpec("a", constant([float("nan"), 1.0, 0.0]))])
    assert result.components["a"] == [None, 1.0, 0.0]
    assert result.total == [0.0, 1.0, 0.0]


def test_numeric_types_are_converted():
    values = [True, np.float32(0.5), torch.tensor(2)]
    result = run([RewardSpec("a", constant(values))])
    assert result.components["a"] == [1.0, 0.5, 2.0]
    assert all(type(v) is float for v in result.components["a"])


@pytest.mark.parametrize("output", [np.array([1.0, 0.0, 0.5]), torch.tensor([1.0, 0.0, 0.5]), (1, 0, 0.5)])
def test_arrays_and_tuples_are_accepted(output):
    result = run([RewardSpec("a", lambda **kwargs: output)])
    assert result.components["a"] == [1.0, 0.0, 0.5]


def test_no_rewards_gives_zero_totals():
    assert run([]).total == [0.0, 0.0, 0.0]


def test_raising_reward_names_the_function():
    def broken(completions, **kwargs):
        raise KeyError("answer")

    with pytest.raises(UserError, match="reward function 'my_mod:broken' raised KeyError") as error:
        run([RewardSpec("my_mod:broken", broken)])
    assert isinstance(error.value.__cause__, KeyError)


def test_missing_column_surfaces_as_user_error():
    with pytest.raises(UserError, match="'math_accuracy' raised TypeError.*answer"):
        run([RewardSpec("math_accuracy", math_accuracy)])


def test_wrong_length_output():
    with pytest.raises(UserError, match="'short' returned 2 values for 3 completions"):
        run([RewardSpec("short", constant([1.0, 0.0]))])


@pytest.mark.parametrize(
    ("output", "fragment"),
    [
        (None, "NoneType"),
        (1.0, "float"),
        ("1.0", "str"),
        ({"a": 1}, "dict"),
        ([1.0, "yes", 0.0], "'yes' for completion 1"),
        ([1.0, [0.5], 0.0], "for completion 1"),
        ([1.0, math.inf, 0.0], "inf for completion 1"),
        ([1.0, 2j, 0.0], "complex"),
    ],
)
def test_invalid_output_names_the_reward(output, fragment):
    with pytest.raises(UserError, match="reward function 'bad' returned") as error:
        run([RewardSpec("bad", lambda **kwargs: output)])
    assert fragment in str(error.value)


def test_duplicate_names_are_refused():
    with pytest.raises(UserError, match="listed twice"):
        run([RewardSpec("a", constant([0.0] * 3)), RewardSpec("a", constant([1.0] * 3))])


def test_column_named_like_a_trl_keyword_is_refused():
    with pytest.raises(UserError, match="column 'completions'"):
        run([RewardSpec("a", constant([0.0] * 3))], columns={"completions": ["x", "y", "z"]})


def test_inconsistent_input_lengths_are_a_bug():
    with pytest.raises(ValueError, match="answer"):
        run([RewardSpec("a", constant([0.0] * 3))], columns={"answer": ["4"]})


# --- concurrency ------------------------------------------------------------------------------


def test_builtins_run_concurrently_and_results_keep_spec_order(monkeypatch):
    import threading
    import time

    from rlvr.rewards import loading

    barrier = threading.Barrier(2, timeout=5)  # passes only if both functions run at the same time

    def slow_a(completions, **kwargs):
        barrier.wait()
        time.sleep(0.05)
        return [1.0] * len(completions)

    def slow_b(completions, **kwargs):
        barrier.wait()
        return [2.0] * len(completions)

    monkeypatch.setitem(loading.BUILTIN_REWARDS, "slow_a", slow_a)
    monkeypatch.setitem(loading.BUILTIN_REWARDS, "slow_b", slow_b)
    result = run([RewardSpec("slow_a", slow_a), RewardSpec("slow_b", slow_b, 0.5)])
    assert list(result.components) == ["slow_a", "slow_b"]
    assert list(result.seconds) == ["slow_a", "slow_b"]
    assert result.seconds["slow_a"] >= 0.05  # each function timed on its own thread
    assert result.total == [2.0, 2.0, 2.0]


def test_user_functions_run_on_the_calling_thread():
    import threading

    threads = []

    def user_reward(completions, **kwargs):
        threads.append(threading.current_thread())
        return [0.0] * len(completions)

    run([RewardSpec("user", user_reward), RewardSpec("boxed_format", boxed_format)])
    assert threads == [threading.current_thread()]


def test_first_failing_reward_in_spec_order_is_reported():
    def broken(completions, **kwargs):
        raise KeyError("answer")

    specs = [RewardSpec("boxed_format", boxed_format), RewardSpec("broken", broken), RewardSpec("also", broken)]
    with pytest.raises(UserError, match="reward function 'broken' raised KeyError"):
        run(specs)


def test_concurrent_builtins_give_the_same_result_as_one_by_one():
    columns = {"answer": ["4", "6", "8"]}
    both = run([RewardSpec("math_accuracy", math_accuracy), RewardSpec("boxed_format", boxed_format, 0.1)], columns)
    alone = {**run([RewardSpec("math_accuracy", math_accuracy)], columns).components,
             **run([RewardSpec("boxed_format", boxed_format)], columns).components}
    assert both.components == alone
