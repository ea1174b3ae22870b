"""What a run sets once for its whole process: CPU threads, the global seed, and memory that stays in the heap."""

from __future__ import annotations

import ctypes
import os

import torch


def derived_seed(seed: int, index: int) -> int:
    """The seed of stream `index` (a step, an epoch, a chunk) of a run seeded with `seed`.

    >>> derived_seed(0, 7), derived_seed(1, 7)
    (7, 1000010)
    """
    return seed * 1_000_003 + index


def configure_process(threads: int, seed: int) -> None:
    """`threads` torch threads (0 = `default_threads()`), torch's global RNG seeded with `seed`, and freed memory
    kept for the next step (`keep_freed_memory`)."""
    torch.set_num_threads(threads or default_threads())
    torch.manual_seed(seed)
    keep_freed_memory()


# glibc's mallopt(3) parameters
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's upper limit on 64-bit systems


def keep_freed_memory() -> bool:
    """Memory a step frees stays in the process's heap for the next step to reuse, instead of going back to the
    system and coming back as fresh pages, each one a page fault that the kernel zeroes (glibc; elsewhere,
    or where mallopt refuses, nothing changes: False).

    glibc serves a block over its mmap threshold with a mapping of its own, unmapped when freed, and returns
    the free top of its heap once it passes the trim threshold. Both adapt to what a process frees, but the trim
    threshold stays at twice the largest freed block (64 MB at most), so the update's activations, hundreds of MB
    freed at once, went back and were faulted in again at the next step: on the benchmark job (bench/
    grpo_vs_trl.py, SmolLM2-135M, 2 AMD EPYC cores) the second step's update took 0.7-1.3 million page faults and
    3-7 s of kernel time; with the heap kept, 0.02 million and 0.2 s, at the same peak (6.09 GB against 6.06).
    Blocks over 32 MB (glibc's limit for the threshold) are still mapped apart. The process keeps its peak
    until it ends, which a training process reaches at every step anyway."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc (macOS has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))


def default_threads() -> int:
    """Torch's own count (the machine's cores), but no more than the CPUs this process may run on: under
    `taskset`, a container's cpuset or a scheduler's allocation, more threads than CPUs only take turns."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(torch.get_num_threads(), allowed))
