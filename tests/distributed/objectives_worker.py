"""One rank of the objectives' data-parallel check, started by torchrun from test_objectives.py.

    python -m torch.distributed.run --standalone --nproc_per_node 2 objectives_worker.py CASES.json OUT_DIR

CASES.json maps each objective's name to its config overrides; each rank builds that Trainer on its World
and takes one step; rank 0 saves each objective's step metrics (the global batch's: rlvr.rl.metrics).
"""

import json
import sys

import torch

from rlvr.config import load_config
from rlvr.distributed.world import World, join
from rlvr.grpo.trainer import Trainer
from tests.distributed.rank_tools import save_and_leave


def main():
    torch.set_num_threads(1)
    cases = json.loads(open(sys.argv[1]).read())
    world = World.from_env()
    join(world, torch.device("cpu"), timeout_s=60)
    results = {}
    for name, overrides in cases.items():
        trainer = Trainer(load_config(None, [*overrides, f"output_dir={sys.argv[2]}/{name}"]), None, world)
        results[name] = trainer.step().metrics
        trainer.close()
    save_and_leave(results, f"{sys.argv[2]}/ranks.pt", world)


if __name__ == "__main__":
    main()
