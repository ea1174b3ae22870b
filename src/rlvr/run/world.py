"""The processes of a run: one, or several launched by torchrun, on torch.distributed.

torchrun sets RANK, WORLD_SIZE and LOCAL_RANK in each process; `World.from_env` reads them (a plain
`python -m rlvr` is rank 0 of 1, exactly as before). `join` starts the process group: gloo on CPUs,
NCCL on GPUs, with a timeout on every collective so a lost rank ends the others instead of hanging
them. `sum_across` is the one reduction a data-parallel step needs: counts and sums over all ranks.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

COLLECTIVE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

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


def join(world: World, device: torch.device, timeout_s: float = COLLECTIVE_TIMEOUT_S) -> None:
    """Start the default process group for `world` (nothing for a single process): NCCL when the ranks
    run on GPUs, gloo otherwise; a collective that waits longer than `timeout_s` raises."""
    if not world.distributed or dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, rank=world.rank, world_size=world.size,
                            timeout=datetime.timedelta(seconds=timeout_s))


def sum_across(values: Sequence[float], world: World) -> list[float]:
    """`values` summed over every rank (float64, so token counts stay exact); unchanged in one process.

    >>> sum_across([3.0, 5.0], SINGLE)
    [3.0, 5.0]
    """
    if not world.distributed:
        return [float(v) for v in values]
    total = torch.tensor(list(values), dtype=torch.float64)
    if dist.get_backend() == "nccl":
        total = total.cuda()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total.cpu().tolist()
