"""Steps 1 and 2 of a GRPO step: sample G completions per prompt and score each group as soon as its
completions have all finished, while the longest completions of other groups are still being decoded.

Reward functions stay on the calling thread (some rely on signal-based timeouts that only work there)
and are called once per group rather than once per batch. Where the decoding runs depends on the device:

- **On an accelerator**, on a worker thread (torch releases the GIL), so the verifiers work *while* the
  other groups decode.
- **On a CPU**, on the calling thread too, each group scored between two decoding steps. A second
  thread running torch costs a CPU rollout more than the overlap gains: OpenMP then keeps two thread
  teams on the same cores, which wait for work by sleeping instead of spinning, and every small
  parallel operation of a decoding step pays the wake-up (measured on 2 cores: the same rollout took
  14.4-15.2 s on a worker thread against 10.6-11.6 s on the main thread).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rlvr.records import Example, Rollout, ScoredRollout
from rlvr.rewards import RewardResult, RewardSpec, compute_rewards
from rlvr.rewards.batch import reward_inputs, scored_rollout
from rlvr.rewards.trainer_hooks import StepState


class _Cancelled(Exception):
    """Raised in the decoding thread to end a rollout nobody will use."""


GroupDone = Callable[[int, list[str], list[list[int]]], None]  # (group, completion texts, their token ids)


def score_while_sampling(sample: Callable[[GroupDone], Rollout], examples: list[Example], group_size: int,
                         specs: list[RewardSpec], *, concurrent: bool, state: StepState | None = None) -> ScoredRollout:
    """`sample(on_group_done)`, each finished group scored on this thread: meanwhile, with `sample` on a
    worker thread (`concurrent`), or else between two of its decoding steps. `state`: the training step the
    groups are scored for (rlvr.rewards.trainer_hooks)."""
    results: dict[int, RewardResult] = {}

    def score(p: int, texts: list[str], ids: list[list[int]]) -> None:
        results[p] = compute_rewards(specs, **reward_inputs([examples[p]], group_size, texts, ids), state=state)

    if not concurrent:
        rollout = sample(score)
        return scored_rollout(rollout, [results[p] for p in range(len(examples))])
    ready: queue.Queue[tuple[int, list[str], list[list[int]]]] = queue.Queue()
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
                score(p, texts, ids)
        except BaseException:
            cancelled.set()
            raise
        rollout = future.result()
    return scored_rollout(rollout, [results[p] for p in range(len(examples))])
