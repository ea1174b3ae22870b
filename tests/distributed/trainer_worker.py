"""One rank of the data-parallel GRPO trainer checks, started by torchrun from test_trainer.py.

    python -m torch.distributed.run --standalone --nproc_per_node 2 trainer_worker.py OUT_DIR KEY=VALUE ...

Each rank builds the Trainer (config: the KEY=VALUE overrides) on its World and takes two steps; rank 0
saves what every rank saw in each step: the global batches drawn from the prompt stream, the positions
it sampled, its stream state afterwards, its scored groups with their advantages, the step's metrics,
and how far apart the ranks' weights are.
"""

import sys

import torch

import rlvr.grpo.trainer as trainer_module
from rlvr.config import load_config
from rlvr.distributed.world import World, gather_across, join
from rlvr.rl.metrics import completion_advantages
from tests.distributed.rank_tools import replica_spread, save_and_leave


def main():
    torch.set_num_threads(1)
    out, overrides = sys.argv[1], sys.argv[2:]
    world = World.from_env()
    join(world, torch.device("cpu"), timeout_s=60)
    trainer = trainer_module.Trainer(load_config(None, overrides), None, world)
    seen = {"drawn": [], "sampled": [], "batch": []}
    draw, sample, record = trainer.source.prompts.next_batch, trainer.source.sample, trainer_module.step_record
    trainer.source.prompts.next_batch = lambda: seen["drawn"].append(draw()) or seen["drawn"][-1]
    trainer.source.sample = (lambda positions, *a, **k: seen["sampled"].append(list(positions))
                             or sample(positions, *a, **k))
    trainer_module.step_record = lambda batch, *a: seen["batch"].append(batch) or record(batch, *a)
    steps = []
    for _ in range(2):
        metrics = trainer.step().metrics
        batch = seen["batch"][-1]
        steps.append({"drawn": list(seen["drawn"]), "sampled": list(seen["sampled"]),
                      "stream": trainer.source.prompts.state_dict(), "scored": batch.scored,
                      "advantages": completion_advantages(batch), "metrics": metrics,
                      "replica_spread": (None if trainer.policy.trained.sharded or not world.distributed
                                         else replica_spread(trainer.policy.model))})
        seen["drawn"].clear(), seen["sampled"].clear()
    save_and_leave(gather_across(steps, world), f"{out}/ranks.pt", world)


if __name__ == "__main__":
    main()
