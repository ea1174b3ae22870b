"""What the torchrun workers of these tests share: how far apart the ranks' weights are, and ending."""

import torch
import torch.distributed as dist

from rlvr.distributed.world import end_rank, leave


def replica_spread(model):
    """The largest difference between any two ranks' copies of any weight (0.0: bitwise identical)."""
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    high, low = flat.clone(), flat.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return float((high - low).abs().max())


def save_and_leave(results, path, world):
    """Rank 0 saves `results` at `path`; every rank waits for the others, leaves the process group and ends
    as `rlvr` ranks end (`end_rank`: without the interpreter's teardown)."""
    if world.is_main:
        torch.save(results, path)
    leave()
    end_rank(0)
