"""What a run sets once for its whole process: CPU threads and the global seed."""

from __future__ import annotations

import os

import torch


def derived_seed(seed: int, index: int) -> int:
    """The seed of stream `index` (a step, an epoch, a chunk) of a run seeded with `seed`.

    >>> derived_seed(0, 7), derived_seed(1, 7)
    (7, 1000010)
    """
    return seed * 1_000_003 + index


def configure_process(threads: int, seed: int) -> None:
    """`threads` torch threads (0 = `default_threads()`) and torch's global RNG seeded with `seed`."""
    torch.set_num_threads(threads or default_threads())
    torch.manual_seed(seed)


def default_threads() -> int:
    """Torch's own count (the machine's cores), but no more than the CPUs this process may run on: under
    `taskset`, a container's cpuset or a scheduler's allocation, more threads than CPUs only take turns."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(torch.get_num_threads(), allowed))
