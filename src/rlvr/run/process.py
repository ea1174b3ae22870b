"""What a run sets once for its whole process: CPU threads and the global seed."""

from __future__ import annotations

import torch


def configure_process(threads: int, seed: int) -> None:
    """`threads` torch threads (0 = as many as torch would use) and torch's global RNG seeded with `seed`."""
    torch.set_num_threads(threads or torch.get_num_threads())
    torch.manual_seed(seed)
