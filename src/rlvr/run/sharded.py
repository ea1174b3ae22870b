"""Checkpoints of a run on several ranks: every rank writes its own part (torch.distributed.checkpoint).

    step-N/dcp/            the recipe's sharded state (model and optimizer): each rank writes its shards,
                           a replicated tensor (DDP) is written once
    step-N/rng/rankR.pt    each rank's RNG state
    step-N/model/, trainer.pt, config.yaml   rank 0, as in one process (model/ is the whole model)

Everything goes into one temporary folder (named by rank 0's pid) that rank 0 renames into place once
every rank has finished, so a checkpoint stays atomic. DCP reshards on load: a checkpoint loads at
any world size, in one process too, under either strategy.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from rlvr import paths
from rlvr.distributed.world import World, barrier, gather_across
from rlvr.run.checkpoint import (
    disk_full,
    out_of_space,
    rng_state,
    save_checkpoint,
    set_rng_state,
    temporary_dir,
)


def save_sharded_checkpoint(run_dir: Path, step: int, *, write: Callable[[Path], None], state: dict[str, Any],
                            config: Any, shards: dict[str, Any], world: World, keep: int = 2) -> Path:
    """Every rank: write its part of `shards` and its RNG; rank 0: the rest (`write`, `state`, `config`),
    then the rename. Every rank calls this."""
    final = paths.step_dir(run_dir, step)
    exists, pid = gather_across((final.exists(), os.getpid()), world)[0]  # rank 0's view, for all
    if exists:
        return final
    tmp = temporary_dir(final, pid)
    if world.is_main:
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / paths.RANK_RNG).mkdir(parents=True)
    try:  # (a barrier fails too when another rank dies meanwhile)
        barrier(world)
        dcp_save(shards, checkpoint_id=str(tmp / paths.SHARDS))
        torch.save(rng_state(), tmp / paths.RANK_RNG / f"rank{world.rank}.pt")
        barrier(world)
    except BaseException as error:  # the half-written copy goes (the other ranks' writes then fail too)
        full = out_of_space(error, tmp.parent)
        shutil.rmtree(tmp, ignore_errors=True)
        if full:
            raise disk_full(run_dir, step) from None
        raise
    if world.is_main:
        save_checkpoint(run_dir, step, write=write, state=state, config=config, keep=keep, tmp=tmp)
    barrier(world)
    return final


def load_shards(checkpoint: Path, template: dict[str, Any]) -> dict[str, Any]:
    """`template` (the recipe's sharded state, as it is now, at this world size) filled from the checkpoint's
    dcp/, resharded as needed."""
    with warnings.catch_warnings():  # in one process DCP says it assumes one process: that is the point here
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp_load(template, checkpoint_id=str(checkpoint / paths.SHARDS))
    return template


def restore_rng(checkpoint: Path, state: dict[str, Any], world: World) -> None:
    """This rank's RNG as saved, or rank 0's (in trainer.pt) when the checkpoint has none for it."""
    mine = checkpoint / paths.RANK_RNG / f"rank{world.rank}.pt"
    set_rng_state(torch.load(mine, weights_only=False) if mine.is_file() else state["rng"])
