"""One rank of the data-parallel update check, started by torchrun from test_ddp_update.py.

    python -m torch.distributed.run --standalone --nproc_per_node 2 ddp_worker.py CASE.pt OUT_DIR

CASE.pt holds the starting weights, the global TrainBatch, which groups each rank takes, and the
settings; each rank runs steps of μ `policy_update`s on its share through DDP or FSDP2 (the case's
strategy), and rank 0 saves the last gradients, the weights after each step (whole) and the
statistics, with, under DDP, a check that the replicas are bitwise identical.
"""

import dataclasses
import sys

import torch

from rlvr.config import AlgorithmConfig, OptimConfig
from rlvr.distributed.world import World, join
from rlvr.models import build_tiny_model
from rlvr.optim import build_optimizer
from rlvr.rl.batch import micro_batches
from rlvr.rl.update import policy_update
from rlvr.run.policy import Policy
from tests.distributed.rank_tools import replica_spread, save_and_leave


def select_groups(batch, groups):
    """The TrainBatch of the given prompt groups only (their prompts and all G completions of each)."""
    r, g = batch.rollout, batch.rollout.group_size
    rows = torch.tensor([p * g + j for p in groups for j in range(g)])
    prompts = torch.tensor(groups)
    rollout = dataclasses.replace(
        r, examples=[r.examples[p] for p in groups], prompt_ids=r.prompt_ids[prompts],
        prompt_mask=r.prompt_mask[prompts],
        completion_ids=r.completion_ids[rows], completion_mask=r.completion_mask[rows],
        sampling_logprobs=r.sampling_logprobs[rows], truncated=r.truncated[rows],
        completions=[r.completions[i] for i in rows.tolist()])
    scored = dataclasses.replace(batch.scored, rollout=rollout, rewards=batch.scored.rewards[prompts],
                                 reward_components={k: v[prompts] for k, v in batch.scored.reward_components.items()})
    pick = lambda t: None if t is None else t[rows]  # noqa: E731
    return dataclasses.replace(batch, scored=scored, advantages=batch.advantages[rows],
                               old_logprobs=pick(batch.old_logprobs), ref_logprobs=pick(batch.ref_logprobs),
                               loss_mask=batch.loss_mask[rows])


def run_update(policy, batch, case, aggregation):
    """`case["steps"]` steps of μ policy updates of `policy` (a Policy of one process or of this rank) on `batch`,
    with one optimizer as a run has; (the statistics of each update, the weights after each step)."""
    algo = dataclasses.replace(AlgorithmConfig(**case["algo"]), loss_aggregation=aggregation)
    optimizer, scheduler = build_optimizer(policy.model, OptimConfig(**case["optim"]), 10)
    kwargs = dict(algo=algo, micro_batch_tokens=case["micro_batch_tokens"], temperature=1.0, max_grad_norm=1.0,
                  max_new_tokens=case["max_new_tokens"])
    stats, weights = [], []
    for _ in range(case["steps"]):
        stats += [policy_update(policy, optimizer, scheduler, batch, **kwargs) for _ in range(algo.updates_per_batch)]
        weights.append({n: whole(p).detach().clone() for n, p in policy.model.named_parameters()})
    return stats, weights


def whole(tensor):
    """A tensor as one process holds it (a sharded DTensor gathered from every rank)."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def main():
    torch.set_num_threads(1)
    case = torch.load(sys.argv[1], weights_only=False)
    world = World.from_env()
    join(world, torch.device("cpu"), timeout_s=60)
    mine = select_groups(case["batch"], case["groups"][world.rank])
    counts = [len(micro_batches(select_groups(case["batch"], gs).rollout, select_groups(case["batch"], gs).loss_mask,
                                case["micro_batch_tokens"])) for gs in case["groups"]]
    results = {"micro_batches": counts}
    for aggregation in case["aggregations"]:
        model, _ = build_tiny_model(0)
        model.load_state_dict(case["weights"])
        policy = Policy(model, device=torch.device("cpu"), dtype=case.get("dtype", torch.float32), world=world,
                        strategy=case["strategy"])
        seen = []  # the dtype of the weights a projection computes with (FSDP2's mixed precision casts them)
        hook = model.model.layers[0].self_attn.q_proj.register_forward_pre_hook(
            lambda module, _, seen=seen: seen.append(module.weight.dtype))
        stats, weights = run_update(policy, mine, case, aggregation)
        hook.remove()
        results[aggregation] = {
            "stats": stats, "replica_spread": replica_spread(model) if case["strategy"] == "ddp" else None,
            "grads": {n: whole(p.grad).clone() for n, p in model.named_parameters()}, "weights": weights,
            "compute_dtypes": set(seen), "stored_dtypes": {p.dtype for p in model.parameters()},
        }
    save_and_leave(results, f"{sys.argv[2]}/ranks.pt", world)


if __name__ == "__main__":
    main()
