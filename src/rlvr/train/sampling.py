"""Steps 1 and 2 of a GRPO step: sample G completions per prompt and score them, overlapped.

Decoding runs on a worker thread (torch releases the GIL) and this thread scores each group as soon
as all its completions have finished, so the verifiers work while the longest completions of other
groups are still being decoded. Reward functions stay on the calling thread (some rely on
signal-based timeouts that only work there) and are called once per group rather than once per batch.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rlvr.records import Example, Rollout, ScoredRollout
from rlvr.rewards import RewardResult, RewardSpec, compute_rewards
from rlvr.rewards.batch import reward_inputs, scored_rollout


class _Cancelled(Exception):
    """Raised in the decoding thread to end a rollout nobody will use."""


GroupDone = Callable[[int, list[str], list[list[int]]], None]  # (group, completion texts, their token ids)


def score_while_sampling(sample: Callable[[GroupDone], Rollout], examples: list[Example], group_size: int,
                     specs: list[RewardSpec]) -> ScoredRollout:
    """`sample(on_group_done)` on a worker thread, each finished group scored here meanwhile."""
    ready: queue.Queue = queue.Queue()
    results: dict[int, RewardResult] = {}
    cancelled = threading.Event()

    def group_done(p: int, texts: list[str], ids: list[list[int]]) -> None:
        if cancelled.is_set():  # scoring failed or the step was abandoned: stop decoding at the next group
            raise _Cancelled
        ready.put((p, texts, ids))

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollout") as pool:
        future = pool.submit(sample, group_done)
        try:
            while len(results) < len(examples):
                try:
                    p, texts, ids = ready.get(timeout=0.05)
                except queue.Empty:
                    error = future.exception() if future.done() else None
                    if error is not None:
                        raise error from None
                    continue
                results[p] = compute_rewards(specs, **reward_inputs([examples[p]], group_size, texts, ids))
        except BaseException:
            cancelled.set()
            raise
        rollout = future.result()
    return scored_rollout(rollout, [results[p] for p in range(len(examples))])
