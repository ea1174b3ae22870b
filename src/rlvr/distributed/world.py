"""The processes of a run: one, or several launched by torchrun, on torch.distributed.

torchrun sets RANK, WORLD_SIZE and LOCAL_RANK in each process; `World.from_env` reads them (a plain
`python -m rlvr` is rank 0 of 1, exactly as before). `join` starts the process group: gloo on CPUs,
NCCL on GPUs, with a timeout on every collective so a lost rank ends the others instead of hanging
them, each saying in one line what it waited for (`waited_too_long`). The reductions a data-parallel
step needs are here, each a no-op in one process: counts and sums over all ranks (`sum_across`), one
decision for all (`any_across`), and every rank's records in rank order (`gather_across`), with
`shard`/`unshard` to split a list across ranks and put it back.
"""

from __future__ import annotations

import atexit
import datetime
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, TypeVar

import torch
import torch.distributed as dist

COLLECTIVE_TIMEOUT_S = 600.0
T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    # the process group its collectives run in (None: the default one); a thread that runs collectives beside
    # the main thread's has a group of its own (`own_group`), or the two would interleave theirs
    group: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def from_env(cls) -> World:
        """This process's place, from torchrun's environment (rank 0 of 1 without it).

        >>> World.from_env() if "RANK" not in os.environ else World()
        World(rank=0, size=1, local_rank=0)
        """
        return cls(rank=int(os.environ.get("RANK", 0)), size=int(os.environ.get("WORLD_SIZE", 1)),
                   local_rank=int(os.environ.get("LOCAL_RANK", 0)))

    @property
    def is_main(self) -> bool:
        """Rank 0 writes the run's files (metrics, samples, the Hugging Face export) and the progress bar."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


SINGLE = World()


def own_group(world: World) -> World:
    """`world` with a process group of its own (gloo) for a second thread's collectives; every rank must call it,
    in the same order. A single process is returned as it is."""
    if not world.distributed:
        return world
    import dataclasses

    return dataclasses.replace(world, group=dist.new_group(backend="gloo"))


def join(world: World, device: torch.device, timeout_s: float = COLLECTIVE_TIMEOUT_S) -> None:
    """Start the default process group for `world` (nothing for a single process): NCCL when the ranks
    run on GPUs, gloo otherwise; a collective that waits longer than `timeout_s` raises."""
    if not world.distributed or dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":  # one GPU per rank of a node: `cuda` means this rank's own
        torch.cuda.set_device(world.local_rank)
    dist.init_process_group(backend, rank=world.rank, world_size=world.size,
                            timeout=datetime.timedelta(seconds=timeout_s))
    _joined["timeout_s"] = timeout_s


def leave() -> None:
    """Wait for every rank, then close the process group (nothing if none was started)."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def end_rank(code: int) -> NoReturn:
    """End this rank's process with `code`, its work done and saved: as at any exit, its other threads are
    waited for (a checkpoint being written) and the exit handlers run (trackers finish uploading); then the
    process ends without the interpreter's teardown, in which torch.distributed's C++ threads can abort it
    even after `leave` (`terminate called without an active exception`: seen with gloo under load), which
    torchrun would report as a failed run."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


_joined = {"timeout_s": COLLECTIVE_TIMEOUT_S}  # the process group's timeout, for `waited_too_long`


def waited_too_long(error: BaseException) -> str | None:
    """What a rank whose collective gave up waiting for the others (`join`'s timeout_s) should say, in
    one line: where it waited, and what to do; None for any other error. gloo raises in the rank that
    waits (NCCL's watchdog aborts the process instead: nothing to catch)."""
    collective, caller = _where_waited(error.__traceback__)
    text = str(error)  # (gloo's own message names it: a DDP all-reduce in backward has no Python frame)
    if "Timed out" not in text or (collective is None and "gloo" not in text):
        return None
    timeout = f"{_joined['timeout_s']:g} s"
    return (f"gave up after {timeout} waiting for the other ranks in {collective or 'a collective'}, called by "
            f"{caller}: another rank is stalled or much slower than this one (a reward that hangs, say); if its "
            f"work can take that long, raise distributed.timeout_s (now {timeout})")


def _where_waited(tb: TracebackType | None) -> tuple[str | None, str]:
    """(the torch.distributed function that waited, if one did, and the rlvr function that called it)."""
    rlvr, here, torch_dist = Path(__file__).parents[1], Path(__file__), Path(dist.__file__).parent
    collective: str | None = None
    caller = "rlvr"
    while tb is not None:
        code, path = tb.tb_frame.f_code, Path(tb.tb_frame.f_code.co_filename)
        if path.is_relative_to(rlvr) and path != here:
            collective, caller = None, f"{code.co_name} ({path.relative_to(rlvr.parent)}:{tb.tb_lineno})"
        elif collective is None and path.is_relative_to(torch_dist) and code.co_name != "wrapper":
            collective = code.co_name  # the first torch.distributed function called (not its logging wrapper)
        tb = tb.tb_next
    return collective, caller


def tag_warnings(world: World) -> None:
    """Python warnings of this rank say which rank they come from (nothing in one process)."""
    if not world.distributed or getattr(warnings.formatwarning, "rank_tagged", False):
        return
    plain = warnings.formatwarning

    def tagged(*args: Any, **kwargs: Any) -> str:
        return f"[rank {world.rank}] {plain(*args, **kwargs)}"

    tagged.rank_tagged = True  # type: ignore[attr-defined]
    warnings.formatwarning = tagged


def barrier(world: World) -> None:
    """Wait until every rank is here (nothing in one process)."""
    if world.distributed:
        dist.barrier(group=world.group)


def sum_across(values: Sequence[float], world: World) -> list[float]:
    """`values` summed over every rank (float64, so token counts stay exact); unchanged in one process.

    >>> sum_across([3.0, 5.0], SINGLE)
    [3.0, 5.0]
    """
    return _reduce(values, world, "sum")


def _reduce(values: Sequence[float], world: World, op: str) -> list[float]:
    if not world.distributed:
        return [float(v) for v in values]
    total = torch.tensor(list(values), dtype=torch.float64)
    if dist.get_backend(world.group) == "nccl":
        total = total.cuda()
    dist.all_reduce(total, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX, group=world.group)
    return total.cpu().tolist()


def any_across(flag: bool, world: World) -> bool:
    """Whether `flag` is set on any rank, so that every rank takes the same decision (stop, sample more).

    >>> any_across(True, SINGLE)
    True
    """
    return max_across([1.0 if flag else 0.0], world)[0] > 0


def max_across(values: Sequence[float], world: World) -> list[float]:
    """`values` maximised over every rank; unchanged in one process.

    >>> max_across([2.0], SINGLE)
    [2.0]
    """
    return _reduce(values, world, "max")


def gather_across(record: T, world: World) -> list[T]:
    """Every rank's `record` (any picklable object), in rank order, on every rank.

    >>> gather_across({"n": 3}, SINGLE)
    [{'n': 3}]
    """
    if not world.distributed:
        return [record]
    out: list[Any] = [None] * world.size
    dist.all_gather_object(out, record, group=world.group)
    return out


def shard(items: Sequence[T], world: World) -> list[T]:
    """This rank's share of `items`: every world.size-th, starting at its rank (all of them in one process).

    >>> shard(list("abcdefg"), World(rank=1, size=3))
    ['b', 'e']
    """
    return list(items[world.rank::world.size])


def unshard(shares: Sequence[Sequence[T]]) -> list[T]:
    """The list that `shard` split into `shares` (one per rank, in rank order), in its original order.

    >>> unshard([["a", "d", "g"], ["b", "e"], ["c", "f"]])
    ['a', 'b', 'c', 'd', 'e', 'f', 'g']
    """
    size = len(shares)
    out: list[T] = []
    for i in range(sum(len(s) for s in shares)):
        out.append(shares[i % size][i // size])
    return out


def map_sharded(fn: Callable[[list[T]], list[U]], items: Sequence[T], world: World) -> list[U]:
    """`fn(items)`, each rank computing it on its share (`shard`) and every rank getting all the results,
    in the items' order (`fn` returns one result per item).

    >>> map_sharded(lambda xs: [x * x for x in xs], [1, 2, 3], SINGLE)
    [1, 4, 9]
    """
    if not world.distributed:
        return fn(list(items))
    return unshard(gather_across(fn(shard(items, world)), world))
