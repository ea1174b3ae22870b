"""AdamW with linear warm-up and an optional decay (constant, linear or cosine)."""

from __future__ import annotations

import math
from typing import Any

import torch

from rlvr.config import OptimConfig


def lr_multiplier(step: int, *, warmup_steps: int, total_steps: int, schedule: str, min_lr_ratio: float) -> float:
    """Factor on the peak learning rate for optimizer step `step` (0-based).

    >>> [round(lr_multiplier(s, warmup_steps=2, total_steps=6, schedule="linear", min_lr_ratio=0.0), 2)
    ...  for s in range(6)]
    [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    if schedule == "linear":
        decay = 1.0 - progress
    elif schedule == "cosine":
        decay = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        raise ValueError(f"unknown schedule {schedule!r}")
    return min_lr_ratio + (1.0 - min_lr_ratio) * decay


def load_schedule(scheduler: torch.optim.lr_scheduler.LambdaLR, state: dict[str, Any]) -> None:
    """`scheduler`'s state from a checkpoint, and the learning rates at its step computed again from this run's
    schedule: a run resumed with more steps (`--max-steps`) goes on along its longer schedule, instead of
    training its next step at the rate the shorter one had reached (0 at the end of a linear decay). Unchanged
    steps give the rates the checkpoint holds, to the bit (the same product)."""
    scheduler.load_state_dict(state)
    rates = [base * rate(scheduler.last_epoch) for base, rate in zip(scheduler.base_lrs, scheduler.lr_lambdas)]
    for group, lr in zip(scheduler.optimizer.param_groups, rates):
        group["lr"] = lr
    scheduler._last_lr = rates  # (what get_last_lr() reports)


def build_optimizer(
    model: torch.nn.Module, config: OptimConfig, total_steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the trainable parameters and its scheduler (stepped once per optimizer step)."""
    params = [p for p in model.parameters() if p.requires_grad]
    # The fused kernel updates each tensor in one pass: on this project's CPU, 0.38 s instead of 0.76 s
    # a step for SmolLM2's 135M parameters, and ~0.5 GB less peak than the default foreach path (bench/optimizer.py).
    fused = all(p.device.type in ("cpu", "cuda") and p.dtype in (torch.float32, torch.float16, torch.bfloat16)
                for p in params)
    optimizer = torch.optim.AdamW(params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay,
                                  fused=fused)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: lr_multiplier(
            s, warmup_steps=config.warmup_steps, total_steps=total_steps, schedule=config.schedule,
            min_lr_ratio=config.min_lr_ratio,
        ),
    )
    return optimizer, scheduler
