"""How a model is spread over the ranks (`distributed.strategy`): DDP, a whole copy on every rank with
the gradients averaged, or FSDP2 (`torch.distributed.fsdp.fully_shard`), the weights, gradients and
optimizer state sharded per decoder layer and gathered layer by layer for each forward and backward.

FSDP2 asks two things of the code that runs the model, both handled here:
- every rank runs the same sequence of forward and backward passes (each one gathers weights from
  all ranks): `equal_counts` pads a rank's micro-batches with dummies that carry no loss;
- decoding runs through `gathered`, which gathers every layer once for the whole rollout (the ranks
  may then decode different lengths, with no collective in the loop) and shards them again after.

State leaves a sharded model only whole (`full_state_dict`, `optimizer_state`), keyed by parameter
name, so a checkpoint loads at any world size and under either strategy.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard, register_fsdp_forward_method
from torch.nn.parallel import DistributedDataParallel

from rlvr.distributed.world import World, max_across
from rlvr.logprobs import PolicyModule
from rlvr.models.adapters import add_unrounded_sums, sum_lora_in_place

T = TypeVar("T")
M = TypeVar("M")


def spread(module: torch.nn.Module, world: World, strategy: str, device: torch.device, dtype: torch.dtype,
           *, trained: bool = True) -> torch.nn.Module:
    """`module` as the ranks run it: itself in one process; DDP-wrapped (`trained`) or as it is (a frozen
    reference: nothing to average) under ddp; sharded in place under fsdp (a module holding the causal LM
    as `.model`: PolicyModule), in bf16 compute with fp32 gradient reduction when `dtype` is bf16
    (FSDP2's MixedPrecisionPolicy)."""
    if not world.distributed or (strategy == "ddp" and not trained):
        return module
    if strategy == "ddp":
        gpu = [torch.cuda.current_device() if device.index is None else device.index] if device.type == "cuda" else None
        return DistributedDataParallel(module, forward_sync_buffers=False, device_ids=gpu)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, (world.size,))
    precision = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
                 if dtype == torch.bfloat16 else MixedPrecisionPolicy())
    model: torch.nn.Module = module.model  # type: ignore[assignment]
    layers = set(getattr(model, "_no_split_modules", None) or ())
    for sub in model.modules():
        if type(sub).__name__ in layers:  # the decoder layers: one gather each
            fully_shard(sub, mesh=mesh, mp_policy=precision)
    fully_shard(module, mesh=mesh, mp_policy=precision)  # the rest (embeddings, final norm, head)
    register_fsdp_forward_method(module, "sample")
    return module


class Trained:
    """A module as the ranks train it (`spread`): itself in one process, DDP-wrapped, or FSDP-sharded, with the
    verbs every recipe's update needs, so that no step code asks which: `__call__` runs the module through
    the wrapper's hooks (its forward computes what the loss needs: log-probs, an NLL, scores),
    `accumulating(last)` holds DDP's all-reduce back until a step's last micro-batch, and `optimizer_step`
    clips the gradient norm and steps the optimizer and its schedule.

    >>> from rlvr.distributed.world import SINGLE
    >>> trained = Trained(torch.nn.Linear(2, 1), SINGLE, "ddp", torch.device("cpu"), torch.float32)
    >>> trained(torch.ones(1, 2)).shape, trained.sharded
    (torch.Size([1, 1]), False)
    """

    def __init__(self, module: torch.nn.Module, world: World, strategy: str, device: torch.device,
                 dtype: torch.dtype) -> None:
        self.module, self.world = module, world  # (the bare module: what the wrapper wraps)
        add_unrounded_sums(module, dtype)  # under bf16, LoRA's term kept whole: what the sampler's fold keeps
        sum_lora_in_place(module)  # (the same bits as peft's sum, in less memory)
        self.runner = spread(module, world, strategy, device, dtype)
        self.sharded = is_sharded(self.runner)

    def __call__(self, *args: Any) -> Any:
        return self.runner(*args)

    def accumulating(self, last: bool) -> contextlib.AbstractContextManager[Any]:
        """The block of one micro-batch's backward: under DDP the gradients are all-reduced only on the last."""
        ddp = isinstance(self.runner, DistributedDataParallel)
        return self.runner.no_sync() if ddp and not last else contextlib.nullcontext()  # type: ignore[operator]

    def equal_counts(self, runs: list[M]) -> list[M]:
        """`runs` as every rank must run them (FSDP: as many passes on each, `equal_counts`)."""
        return equal_counts(runs, self.world, self.sharded)

    def optimizer_step(self, optimizer: torch.optim.Optimizer, scheduler: Any,
                       max_grad_norm: float) -> dict[str, float]:
        """Clip the trained parameters' gradient norm to `max_grad_norm` (0 = no clipping) and take one step of
        `optimizer` and its `scheduler` (None: a constant rate): {"grad_norm": before clipping, "lr": the step's
        learning rate}."""
        params = [p for p in self.runner.parameters() if p.requires_grad]
        norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm if max_grad_norm > 0 else float("inf"))
        stats = {"grad_norm": grad_norm(norm), "lr": float(optimizer.param_groups[0]["lr"])}
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        return stats


def is_sharded(module: torch.nn.Module) -> bool:
    """Whether `module`, or the module it calls (a LoRA run's reference, rlvr.models.adapters), is FSDP's."""
    return isinstance(module, FSDPModule) or isinstance(getattr(module, "module", None), FSDPModule)


def unwrap(module: torch.nn.Module) -> torch.nn.Module:
    """The causal LM inside `module`: a PolicyModule's, DDP-wrapped or not, or `module` itself.

    >>> from rlvr.models import build_tiny_model
    >>> model = build_tiny_model(0)[0]
    >>> unwrap(PolicyModule(model)) is model and unwrap(model) is model
    True
    """
    inner = module.module if isinstance(module, DistributedDataParallel) else module
    return inner.model if isinstance(inner, PolicyModule) else inner


@contextmanager
def gathered(module: torch.nn.Module) -> Iterator[None]:
    """Every FSDP unit inside `module` gathered once and kept whole until the block ends."""
    units = [m for m in module.modules() if isinstance(m, FSDPModule) and m is not module]
    for unit in units:
        unit.unshard()
        unit.set_reshard_after_forward(False)
    try:
        yield
    finally:
        for unit in units:
            unit.reshard()
            unit.set_reshard_after_forward(True)
        module.reshard()  # type: ignore[operator]


def equal_counts(runs: list[M], world: World, sharded: bool) -> list[M]:
    """Under FSDP, `runs` (micro-batches, with a `loss_mask`) padded to the largest count on any rank with
    copies of the first whose loss mask is empty: they take part in every gather and add nothing."""
    if not sharded or not world.distributed:
        return runs
    most = int(max_across([len(runs)], world)[0])
    first: Any = runs[0]
    dummy = dataclasses.replace(first, loss_mask=torch.zeros_like(first.loss_mask))
    return runs + [dummy] * (most - len(runs))


def grad_norm(norm: torch.Tensor) -> float:
    """A gradient norm as a number (a sharded model's is a DTensor over every rank's shard)."""
    full = getattr(norm, "full_tensor", None)
    return float(full() if full is not None else norm)


def holds_shards(model: torch.nn.Module) -> bool:
    """Whether FSDP has sharded `model` or any module inside it."""
    return any(isinstance(m, FSDPModule) for m in model.modules())


def full_state_dict(model: torch.nn.Module) -> dict[str, Any]:
    """The whole state dict of `model` (a causal LM, possibly with FSDP units inside), on the CPU of rank 0
    (empty on the others). Every rank must call it: it gathers."""
    if not holds_shards(model):
        return model.state_dict()
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """One process's optimizer state keyed by parameter name, so that a run of several ranks, under either
    strategy, can continue from it (they save theirs in parts: rlvr.run.sharded). Before any step was taken, its
    groups' settings alone: get_optimizer_state_dict would first give every parameter the state of one zero step,
    in this optimizer too, and the run's next step would not be the one a run saved at other times takes."""
    if not optimizer.state:
        names = {id(p): n for n, p in model.named_parameters()}
        return {"state": {}, "param_groups": [{**{k: v for k, v in g.items() if k != "params"},
                                               "params": [names[id(p)] for p in g["params"]]}
                                              for g in optimizer.param_groups]}
    return get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True))


def load_optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Restore `optimizer_state`'s output, or an optimizer's own state dict (checkpoints of earlier rlvr
    versions, keyed by position among the trainable parameters), into a whole or a sharded model. A state saved
    before any step was taken (every step so far skipped: no reward signal) restores the groups' settings only:
    set_optimizer_state_dict would give every parameter a state of one zero step, and the next step's bias
    correction would not be the unbroken run's."""
    if not state["state"]:
        for group, saved in zip(optimizer.param_groups, state["param_groups"]):
            group.update({k: v for k, v in saved.items() if k != "params"})
        return
    if all(isinstance(k, int) for k in state["state"]):
        names = [n for n, p in model.named_parameters() if p.requires_grad]  # the optimizer's order
        state = {"state": {names[i]: v for i, v in state["state"].items()},
                 "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]]}
    set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))
