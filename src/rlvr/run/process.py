"""What a run sets once for its whole process: CPU threads and the global seed."""

from __future__ import annotations

import torch


def derived_seed(seed: int, index: int) -> int:
    """The seed of stream `index` (a step, an epoch, a chunk) of a run seeded with `seed`.

    >>> derived_seed(0, 7), derived_seed(1, 7)
    (7, 1000010)
    """
    return seed * 1_000_003 + index


def configure_process(threads: int, seed: int) -> None:
    """`threads` torch threads (0 = as many as torch would use) and torch's global RNG seeded with `seed`."""
    torch.set_num_threads(threads or torch.get_num_threads())
    torch.manual_seed(seed)
