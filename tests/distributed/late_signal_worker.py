"""One rank of the late-signal check, started by torchrun from test_faults.py.

    python -m torch.distributed.run --standalone --nproc_per_node 2 late_signal_worker.py OUT_DIR KEY=VALUE ...

Rank 1 sends itself SIGTERM just after the ranks agreed, at the end of step 2, to go on: the stop
must wait for the next agreement (at the end of step 3) on both ranks, not end rank 1's loop alone
while rank 0 starts step 3. Rank 0 saves what each rank's run returned.
"""

import os
import signal
import sys

import rlvr.run.loop as loop
from rlvr.config import load_config
from rlvr.distributed.world import World, gather_across
from rlvr.grpo.trainer import train_grpo
from tests.distributed.rank_tools import save_and_leave

agree = loop.any_across
agreements = []


def agree_then_signal(flag, world):
    agreed = agree(flag, world)
    agreements.append(agreed)
    if world.rank == 1 and len(agreements) == 2:
        os.kill(os.getpid(), signal.SIGTERM)  # lands after the agreement to go on
    return agreed


def main():
    loop.any_across = agree_then_signal
    summary = train_grpo(load_config(None, sys.argv[2:]))
    world = World.from_env()
    save_and_leave(gather_across(summary, world), f"{sys.argv[1]}/summaries.pt", world)


if __name__ == "__main__":
    main()
