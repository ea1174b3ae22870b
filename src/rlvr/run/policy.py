"""The policy as one handle: every view of the trained causal LM a recipe needs, behind verbs.

    Policy ─logprobs / batch_logprobs─▶ log π_θ (the update's forward, through DDP's or FSDP's hooks)
           ─batch_logprobs(reference=True)─▶ log π_ref (a frozen copy, sharded like the policy, or the policy
                                              with its LoRA adapters off)
           ─decoding─▶ the whole model for a sampler (FSDP gathered, LoRA folded)
           ─named_weights─▶ full tensors, adapters folded (what a sampler of its own loads)
           ─write / full_state / sharded_state─▶ checkpoints

How the model is spread over ranks (one process, DDP, FSDP2: rlvr.distributed.parallel), whether it carries LoRA
adapters (rlvr.models.adapters) and the forward precision (rlvr.models.devices) live here and nowhere
else: the stages that use a Policy never ask which.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

from rlvr.distributed.parallel import (
    Trained,
    full_state_dict,
    gathered,
    is_sharded,
    load_optimizer_state,
    optimizer_state,
    spread,
    unwrap,
)
from rlvr.distributed.world import SINGLE, World
from rlvr.logprobs import PolicyModule, TokenStats
from rlvr.models.adapters import (
    AdaptersOff,
    decoder,
    folded_for_decoding,
    folded_weights,
    has_adapters,
)
from rlvr.models.devices import autocast, frozen_cast_once
from rlvr.run.checkpoint import save_pretrained
from rlvr.run.sharded import load_shards

T = TypeVar("T")


class Rows(Protocol):
    """What a forward pass of the policy reads (rlvr.rl.batch.MicroBatch): read-only, as that frozen record's."""

    @property
    def prompt_ids(self) -> torch.Tensor: ...
    @property
    def prompt_mask(self) -> torch.Tensor: ...
    @property
    def row_prompt(self) -> torch.Tensor: ...
    @property
    def completion_ids(self) -> torch.Tensor: ...
    @property
    def completion_mask(self) -> torch.Tensor: ...
    @property
    def support_floors(self) -> torch.Tensor | None: ...  # where the sampler cut its distribution (rlvr.logprobs)


class Policy:
    """The trained causal LM `model` (a peft model when it carries adapters) on this rank of `world`, and
    π_ref when `reference` is given (a frozen copy) or the model has adapters and `with_reference` (the
    same network with its adapters off, exactly: no copy)."""

    def __init__(self, model: torch.nn.Module, *, device: torch.device, dtype: torch.dtype, world: World = SINGLE,
                 strategy: str = "ddp", reference: torch.nn.Module | None = None, with_reference: bool = False):
        self.model, self.device, self.dtype, self.world = model, device, dtype, world
        self.trained = Trained(PolicyModule(model), world, strategy, device, dtype)
        self.reference: torch.nn.Module | None = None  # called like the trained module (a PolicyModule's forward)
        if with_reference and has_adapters(model):
            self.reference = AdaptersOff(self.trained.runner if self.trained.sharded else self.trained.module, model)
        elif reference is not None:
            self.reference = spread(PolicyModule(reference), world, strategy, device, dtype, trained=False)
        self.whole: dict[str, dict[str, Any]] = {}  # sharded weights gathered for rank 0's checkpoint

    # ── forward passes ───────────────────────────────────────────────────────────────────────
    def autocast(self) -> AbstractContextManager[Any]:
        """The forward passes' precision (rlvr.models.devices): nothing in fp32."""
        return autocast(self.device, self.dtype)

    def share_prompt(self, reference: bool = False) -> bool:
        """Whether a forward of π_θ (or π_ref) computes each prompt once per micro-batch (rlvr.logprobs): not
        when FSDP shards the model (every rank must run the same passes) nor under activation checkpointing,
        which runs each prompt with every completion."""
        module = self.reference if reference else self.trained.runner
        if module is None or is_sharded(module):
            return False
        inner = unwrap(module.module if isinstance(module, AdaptersOff) else module)
        return not getattr(decoder(inner), "gradient_checkpointing", False)

    def logprobs(self, rows: Rows, temperature: float) -> TokenStats:
        """Log-probabilities and entropies of `rows`' completion tokens under π_θ, in the forward precision:
        with gradients (when enabled) through the wrapper's hooks, without them on this rank's own copy
        (unless sharded: then every pass goes through FSDP)."""
        module = self.trained.runner if torch.is_grad_enabled() or self.trained.sharded else self.trained.module
        cast_once = nullcontext() if self.trained.sharded else frozen_cast_once(self.model, self.dtype)
        with self.autocast(), cast_once:
            return module(*_arguments(rows, temperature, self.share_prompt()))  # type: ignore[no-any-return]

    def reference_logprobs(self, rows: Rows, temperature: float) -> TokenStats:
        """The same under π_ref, without gradients."""
        if self.reference is None:
            raise ValueError("this policy has no reference (β = 0)")
        with torch.no_grad(), self.autocast():
            return self.reference(*_arguments(rows, temperature, self.share_prompt(reference=True)))  # type: ignore[no-any-return]

    def equal_counts(self, runs: list[T]) -> list[T]:
        """Micro-batches as every rank must run them (FSDP: the same number of passes on each)."""
        return self.trained.equal_counts(runs)

    def accumulating(self, last: bool) -> AbstractContextManager[Any]:
        return self.trained.accumulating(last)

    def optimizer_step(self, optimizer: torch.optim.Optimizer, scheduler: Any,
                       max_grad_norm: float) -> dict[str, float]:
        return self.trained.optimizer_step(optimizer, scheduler, max_grad_norm)

    # ── sampling ─────────────────────────────────────────────────────────────────────────────
    def decoding(self, fn: Callable[[torch.nn.Module], T]) -> T:
        """`fn(model)` with the whole model in eval mode and the forward precision, for decoding, which calls it
        outside the wrapper's forward: FSDP's units gathered once for the whole call, LoRA adapters folded
        into copies of the weights (rlvr.models.adapters)."""
        self.model.eval()  # no dropout while sampling; the update runs in train mode
        try:
            with self.autocast():
                if self.trained.sharded:
                    with gathered(self.trained.runner):
                        return self.trained.runner.sample(fn)  # type: ignore[operator, no-any-return]
                with folded_for_decoding(self.model) as model:
                    return fn(model)
        finally:
            self.model.train()

    def named_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, full tensor) of every weight of the model as a plain causal LM would name it, adapters folded
        in: what a sampler holding its own copy loads. Every rank must call it: a sharded model gathers each
        tensor as it is handed out (one at a time, never the whole model at once)."""
        for name, tensor in folded_weights(self.model):
            full: Any = getattr(tensor, "full_tensor", None)  # (a DTensor of a sharded model, gathered)
            yield name, full() if full is not None else tensor

    # ── the reference ────────────────────────────────────────────────────────────────────────
    def refresh_reference(self) -> None:
        """π_ref ← π_θ (DeepSeekMath's iterative RL), a frozen copy's weights set to the policy's."""
        if self.reference is not None and not isinstance(self.reference, AdaptersOff):
            unwrap(self.reference).load_state_dict(self.model.state_dict())

    @property
    def reference_model(self) -> torch.nn.Module | None:
        """The frozen copy π_ref is, when it is one (not the policy with its adapters off)."""
        return None if self.reference is None or isinstance(self.reference, AdaptersOff) else unwrap(self.reference)

    # ── state ────────────────────────────────────────────────────────────────────────────────
    def gather(self, reference: bool) -> None:
        """A sharded model's whole weights (and the reference's, when `reference`), gathered for `write` on
        rank 0. Every rank calls it before the checkpoint is written; a no-op unsharded."""
        if not self.trained.sharded:
            return
        self.whole = {"policy": full_state_dict(self.model)}
        if reference and self.reference_model is not None:
            self.whole["reference"] = full_state_dict(self.reference_model)

    def write(self, folder: Path, tokenizer: Any, reference_folder: Path | None = None) -> None:
        """The model (with `tokenizer`) in `folder`, loadable by transformers (with LoRA: the adapters, loadable
        by peft), and the frozen reference in `reference_folder` when given."""
        save_pretrained(folder, self.model, tokenizer, self.whole.get("policy"))
        if reference_folder is not None and self.reference_model is not None:
            save_pretrained(reference_folder, self.reference_model, tokenizer, self.whole.get("reference"))

    def sharded_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The model and `optimizer` as this rank holds them (shards under FSDP), keyed by parameter name, for
        torch.distributed.checkpoint (rlvr.run.sharded); with LoRA the trained adapters only (the frozen base
        is the one the run starts from, model.name)."""
        model, state = get_state_dict(self.model, optimizer, options=StateDictOptions(ignore_frozen_params=True))
        return {"model": model, "optimizer": state}

    def load_sharded(self, checkpoint: Path, optimizer: torch.optim.Optimizer) -> None:
        """The model and `optimizer` from the parts several ranks wrote, at this world size."""
        loaded = load_shards(checkpoint, self.sharded_state(optimizer))
        set_state_dict(self.model, optimizer, model_state_dict=loaded["model"], optim_state_dict=loaded["optimizer"],
                       options=StateDictOptions(strict=not has_adapters(self.model)))

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """`optimizer`'s state keyed by parameter name (loads at any world size, rlvr.distributed.parallel)."""
        return optimizer_state(self.model, optimizer)

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        load_optimizer_state(self.model, optimizer, state)


def _arguments(rows: Rows, temperature: float, share_prompt: bool) -> tuple[Any, ...]:
    return (rows.prompt_ids, rows.prompt_mask, rows.row_prompt, rows.completion_ids, rows.completion_mask,
            temperature, share_prompt, rows.support_floors)
