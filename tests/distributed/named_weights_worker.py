"""One rank of the sharded weights-handout check, started by torchrun from test_named_weights.py.

    python -m torch.distributed.run --standalone --nproc_per_node 2 named_weights_worker.py CASE.pt OUT.pt

CASE.pt holds a LoRA policy's state (adapters trained: B not zero); each rank wraps it in FSDP2 and takes
Policy.named_weights, checking at every tensor handed out that the model's parameters are all still shards
(no unit gathered whole); rank 0 saves what it was handed and those checks."""

import sys

import torch
from torch.distributed.tensor import DTensor

from rlvr.config import LoraConfig
from rlvr.distributed.world import World, join
from rlvr.models import build_tiny_model
from rlvr.models.adapters import add_adapters
from rlvr.run.policy import Policy
from tests.distributed.rank_tools import save_and_leave


def lora_policy(state, world, strategy):
    model, _ = build_tiny_model(0)
    model = add_adapters(model, LoraConfig(rank=4, target_modules=["q_proj", "v_proj"]), "tiny")
    model.load_state_dict(state)
    return Policy(model, device=torch.device("cpu"), dtype=torch.float32, world=world, strategy=strategy)


def main():
    torch.set_num_threads(1)
    state = torch.load(sys.argv[1], weights_only=False)
    world = World.from_env()
    join(world, torch.device("cpu"), timeout_s=60)
    policy = lora_policy(state, world, "fsdp")
    handed, sharded_throughout = {}, []
    for name, tensor in policy.named_weights():
        handed[name] = tensor.clone()
        sharded_throughout.append(all(isinstance(p, DTensor) for p in policy.model.parameters()))
    save_and_leave({"weights": handed, "sharded_throughout": sharded_throughout}, sys.argv[2], world)


if __name__ == "__main__":
    main()
