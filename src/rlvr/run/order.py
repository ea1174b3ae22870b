"""A resumable order of examples: the batches of a run as a pure function of (n, batch size, steps, seed).

A resumed run recomputes the same list and continues at its step, so it sees exactly the batches the
unbroken run would have (rlvr sft, rlvr rm).
"""

from __future__ import annotations

import random

from rlvr.run.process import derived_seed


def batch_order(n: int, batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """Indices of the examples in each of `steps` batches: passes over range(n), each shuffled with
    its own seed; the last batch of a pass may be shorter.

    >>> batch_order(5, 2, 4, seed=0)
    [[2, 1], [0, 4], [3], [2, 3]]
    """
    batches: list[list[int]] = []
    epoch = 0
    while len(batches) < steps:
        order = list(range(n))
        random.Random(derived_seed(seed, epoch)).shuffle(order)
        batches += [order[i : i + batch_size] for i in range(0, n, batch_size)]
        epoch += 1
    return batches[:steps]
