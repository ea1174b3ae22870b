"""Supervised fine-tuning: `train_sft(config)`.

    rows ─▶ held-out split ─▶ token ids + labels ─▶ a step's examples ─▶ micro-batches (packed?) ─▶ Σ NLL / tokens ─▶ AdamW step

The run directory mirrors `rlvr train`'s: config.yaml, metrics.jsonl (loss, lr, grad_norm,
tokens, tokens/s per step; eval_loss every eval_every), tensorboard/, checkpoints/step-N/
(model/ = save_pretrained weights + tokenizer, so the run directory loads wherever a model
name is taken; trainer.pt = optimizer, scheduler, RNG and step; renamed into place, so Ctrl-C
never leaves a half-written one) and summary.json (held-out loss before and after).

The order of the examples is a pure function of (seed, number of training rows, batch_size), so
a resumed run sees exactly the batches the unbroken run would have, and ends with the same weights.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from rlvr.config import SFTConfig
from rlvr.config import load_command_config, save_config
from rlvr.errors import UserError
from rlvr.models import load_model
from rlvr.optim import build_optimizer
from rlvr.train.loop import StopFlag
from rlvr.train.prompts import batch_order
from rlvr.sft.data import SFTData, SFTExample, prepare_data, read_rows
from rlvr.sft.loss import completion_nll, held_out_loss
from rlvr.sft.masking import trained_count
from rlvr.sft.packing import micro_batches
from rlvr.train import checkpoint as ckpt
from rlvr.train.loop import stop_on_ctrl_c
from rlvr.train.metrics import MetricsWriter


@dataclass
class SFTRun:
    """Everything a run needs between steps; `step` is the number of optimizer steps done."""

    config: SFTConfig
    run_dir: Path
    model: torch.nn.Module
    tokenizer: Any
    data: SFTData
    plan: list[list[int]]  # indices into data.train of each step's examples
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    step: int
    before: dict[str, Any] | None  # held-out loss before the first step


def train_sft(config: SFTConfig, on_step_end: Callable[[int, dict[str, float], StopFlag], None] | None = None, *,
              resume: bool = False) -> dict[str, Any]:
    """Fine-tune, checkpoint and evaluate as `config` says (`resume`: continue the run in
    config.output_dir from its latest checkpoint); return (and write) the summary."""
    config.validate()
    run = start_run(config, resume)
    flag, writer, start = StopFlag(), MetricsWriter(run.run_dir, tensorboard=config.tensorboard), time.perf_counter()
    first = run.step
    bar = tqdm(total=len(run.plan), initial=run.step, desc="SFT", unit="step", dynamic_ncols=True)
    run.model.train()
    try:
        with stop_on_ctrl_c(flag):
            while run.step < len(run.plan) and not flag.stop_requested:
                metrics = train_step(run, [run.data.train[i] for i in run.plan[run.step]])
                run.step += 1
                if config.eval_every and run.step % config.eval_every == 0:
                    metrics["eval_loss"] = evaluate(run)["loss"] if run.data.held_out else float("nan")
                writer.write(run.step, metrics)
                bar.update(1)
                bar.set_postfix(loss=f"{metrics['loss']:.3f}", tok_s=f"{metrics['tokens_per_second']:.0f}")
                if on_step_end is not None:
                    on_step_end(run.step, metrics, flag)
                if config.save_every and run.step % config.save_every == 0 and run.step < len(run.plan) and not flag.stop_requested:
                    save(run)
    finally:
        bar.close()
        writer.close()
    path = save(run)
    d = run.data
    summary = {
        "steps": run.step, "stopped_early": run.step < len(run.plan), "train_seconds": round(time.perf_counter() - start, 1),
        "resumed_from_step": first if resume else None, "model": config.model.name, "data": config.data,
        "train_examples": len(d.train), "held_out_examples": len(d.held_out), "dropped_too_long": d.dropped,
        "truncated": d.truncated, "packing": config.packing, "seed": config.seed,
        "before": run.before, "after": evaluate(run), "checkpoint": str(path), "run_dir": str(run.run_dir),
    }
    (run.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def start_run(config: SFTConfig, resume: bool) -> SFTRun:
    """Load the model (from the latest checkpoint when resuming), the data, the optimizer and the plan."""
    torch.set_num_threads(config.threads or torch.get_num_threads())
    torch.manual_seed(config.seed)
    run_dir = Path(config.output_dir)
    latest = ckpt.latest_checkpoint(run_dir)
    if resume and latest is None:
        raise UserError(f"cannot resume: {run_dir} has no complete checkpoint (start it again without --resume)")
    if not resume:
        ckpt.refuse_existing_run(run_dir)
    rows = read_rows(config.data)  # before the model: a bad row fails in a second
    model, tokenizer = load_model(str(latest / "model") if resume else config.model.name, config.model.cache_dir, config.seed)
    data = prepare_data(rows, tokenizer, template=config.template, system_prompt=config.system_prompt,
                        max_length=config.max_length, eval_fraction=config.eval_fraction, seed=config.seed)
    steps = config.max_steps or config.epochs * -(-len(data.train) // config.batch_size)
    optimizer, scheduler = build_optimizer(model, config.optim, steps)
    plan = batch_order(len(data.train), config.batch_size, steps, config.seed)
    run = SFTRun(config, run_dir, model, tokenizer, data, plan, optimizer, scheduler, step=0, before=None)
    if resume:
        restore(run, ckpt.load_trainer_state(latest))
    else:
        run.before = evaluate(run)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(config, run_dir / "config.yaml")
    return run


def train_step(run: SFTRun, examples: list[SFTExample]) -> dict[str, float]:
    """One AdamW step on the token-mean NLL of the completion tokens of `examples` (rlvr.sft.loss)."""
    started, c = time.perf_counter(), run.config
    batches = micro_batches(examples, packing=c.packing, max_length=c.max_length,
                            micro_batch_tokens=c.optim.micro_batch_tokens, pad_id=run.tokenizer.pad_token_id)
    count = sum(trained_count(e.labels) for e in examples)
    run.optimizer.zero_grad(set_to_none=True)
    loss = entropy = 0.0
    for mb in batches:
        nll = completion_nll(run.model, mb)
        (nll.total / count).backward()  # Σ over micro-batches = the batch's token mean
        loss, entropy = loss + float(nll.total.detach()) / count, entropy + nll.entropy / count
    params = [p for p in run.model.parameters() if p.requires_grad]
    grad_norm = torch.nn.utils.clip_grad_norm_(params, c.optim.max_grad_norm if c.optim.max_grad_norm > 0 else float("inf"))
    lr = run.optimizer.param_groups[0]["lr"]
    run.optimizer.step()
    run.scheduler.step()
    seconds = time.perf_counter() - started
    tokens = sum(mb.real_tokens for mb in batches)
    slots = sum(mb.input_ids.numel() for mb in batches)
    return {
        "loss": loss, "lr": lr, "grad_norm": float(grad_norm), "entropy": entropy, "tokens": tokens, "completion_tokens": count,
        "padding_fraction": 1 - tokens / slots, "micro_batches": len(batches), "step_seconds": seconds,
        "tokens_per_second": tokens / max(seconds, 1e-9),
    }


def evaluate(run: SFTRun) -> dict[str, Any] | None:
    c = run.config
    return held_out_loss(run.model, run.data.held_out, packing=c.packing, max_length=c.max_length,
                         micro_batch_tokens=c.optim.micro_batch_tokens, pad_id=run.tokenizer.pad_token_id)


def save(run: SFTRun) -> Path:
    """Checkpoint the current step atomically: weights + tokenizer in model/, the rest in trainer.pt."""
    state = {"step": run.step, "optimizer": run.optimizer.state_dict(), "scheduler": run.scheduler.state_dict(),
             "train_examples": len(run.data.train), "before": run.before}
    return ckpt.save_checkpoint(run.run_dir, run.step, policy=run.model, tokenizer=run.tokenizer, trainer_state=state, config=run.config)


def restore(run: SFTRun, state: dict[str, Any]) -> None:
    """Continue from a checkpoint's trainer state; metrics logged after it (by an aborted session) are dropped."""
    if state["train_examples"] != len(run.data.train):
        raise UserError(f"cannot resume: the run trained on {state['train_examples']} rows and the data now gives "
                        f"{len(run.data.train)}; resume with the same data, max_length and eval_fraction")
    run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    run.step, run.before = state["step"], state["before"]
    ckpt.set_rng_state(state["rng"])
    metrics = run.run_dir / "metrics.jsonl"
    if metrics.is_file():
        kept = [line for line in metrics.read_text().splitlines() if json.loads(line)["step"] <= run.step]
        metrics.write_text("".join(line + "\n" for line in kept))


def resume_config(run_dir: Path, overrides: list[str] = (), **cli: Any) -> SFTConfig:
    """The config of the run in `run_dir` (its latest checkpoint's), with overrides such as max_steps."""
    latest = ckpt.latest_checkpoint(run_dir)
    if latest is None or not (latest / "config.yaml").is_file():
        raise UserError(f"cannot resume: {run_dir} has no complete checkpoint (is it a run directory made by `rlvr sft`?)")
    return load_command_config(SFTConfig, latest / "config.yaml", list(overrides), **{**cli, "output_dir": str(run_dir)})
