"""Supervised fine-tuning as a recipe of the run core: `train_sft(config, resume=False)`.

    rows ─▶ held-out split ─▶ token ids + labels ─▶ a step's examples ─▶ micro-batches (packed?)
         ─▶ Σ NLL / tokens ─▶ AdamW step

The run directory is `rlvr train`'s (rlvr.paths): config.yaml, metrics.jsonl (loss, lr, grad_norm,
tokens, tokens/s per step; eval_loss every eval_every), tensorboard/, checkpoints/step-N/ (model/ =
save_pretrained weights + tokenizer, so the run directory loads wherever a model name is taken) and
summary.json (held-out loss before and after).

The order of the examples is a pure function of (seed, number of training rows, batch_size), so a
resumed run sees exactly the batches the unbroken run would have, and ends with the same weights.
Under torchrun each rank trains on its share of every step's examples (DDP), at any world size.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rlvr import paths
from rlvr.config import SFTConfig
from rlvr.config.sections import REPLICATED
from rlvr.distributed.parallel import Trained
from rlvr.distributed.world import SINGLE, World, sum_across
from rlvr.models import load_configured
from rlvr.models.devices import autocast
from rlvr.records import Evaluation
from rlvr.run.checkpoint import save_pretrained
from rlvr.run.loop import OnStepEnd, StepResult, launch
from rlvr.run.supervised import SupervisedRecipe, rows_digest
from rlvr.sft.data import SFTExample, prepare_data, read_rows
from rlvr.sft.loss import NLLModule, held_out_loss
from rlvr.sft.masking import trained_count
from rlvr.sft.packing import MicroBatch, micro_batches


def train_sft(config: SFTConfig, *, resume: bool = False, on_step_end: OnStepEnd | None = None,
              overwrite: bool = False) -> dict[str, Any]:
    """Fine-tune as `config` says (`resume`: continue the run in config.output_dir; `overwrite`: start afresh
    over the run it holds); return its summary."""
    return launch(SFTTrainer, config, resume=resume, on_step_end=on_step_end, overwrite=overwrite)


class SFTTrainer(SupervisedRecipe):
    resume_hint, label, job = "rlvr sft --resume {run_dir}", "SFT", "sft"
    command, unit, state_key = "rlvr sft", "rows", "train_examples"
    same_rows = "the same data, max_length and eval_fraction"

    def __init__(self, config: SFTConfig, checkpoint: Path | None = None, world: World = SINGLE):
        """The data (read before the model: a bad row fails in a second), the model and the plan of steps."""
        self.config, c, self.world = config, config, world
        self.refuse_sharding(c.distributed.strategy, world)
        rows = read_rows(c.data)
        self.model, self.tokenizer, self.device, self.dtype = load_configured(
            c.model, c.seed, str(checkpoint / paths.MODEL) if checkpoint else None)
        self.data = prepare_data(rows, self.tokenizer, template=c.template, system_prompt=c.system_prompt,
                                 max_length=c.max_length, eval_fraction=c.eval_fraction, seed=c.seed)
        self.plan_steps(self.model, c, rows=len(self.data.train),
                        digest=rows_digest([(e.input_ids, e.labels) for e in self.data.train]))
        self.resumed_from: int | None = None
        self.trained = Trained(NLLModule(self.model), world, REPLICATED, self.device, self.dtype)  # what the step runs

    def step(self) -> StepResult:
        """One AdamW step on the token-mean NLL of the step's completion tokens (rlvr.sft.loss).

        Data-parallel, each rank takes its share of the step's examples and divides by the global count
        of trained tokens (times the world size: DDP averages gradients). A rank whose share is empty
        (more ranks than examples) runs one example weighted 0, so that it still meets the all-reduce."""
        started, c, world = time.perf_counter(), self.config, self.world
        mine, weight = self.my_share()
        examples: list[SFTExample] = [self.data.train[i] for i in mine]
        batches = micro_batches(examples, packing=c.packing, max_length=c.max_length,
                                micro_batch_tokens=c.optim.micro_batch_tokens, pad_id=self.tokenizer.pad_token_id)
        count = int(sum_across([weight * sum(trained_count(e.labels) for e in examples)], world)[0])
        self.optimizer.zero_grad(set_to_none=True)
        loss, entropy = self.accumulate(batches, weight * world.size / count)
        loss, entropy = (value / world.size for value in sum_across([loss, entropy], world))
        update = self.trained.optimizer_step(self.optimizer, self.scheduler, c.optim.max_grad_norm)
        self.step_count += 1
        seconds = time.perf_counter() - started
        tokens, slots, runs = sum_across([weight * sum(mb.real_tokens for mb in batches),
                                          weight * sum(mb.input_ids.numel() for mb in batches),
                                          weight * len(batches)], world)
        return StepResult({
            "loss": loss, **update, "entropy": entropy, "tokens": int(tokens),
            "completion_tokens": count, "padding_fraction": 1 - tokens / slots, "micro_batches": int(runs),
            "step_seconds": seconds,
            "tokens_per_second": tokens / max(seconds, 1e-9),
        })

    def accumulate(self, batches: list[MicroBatch], scale: float) -> tuple[float, float]:
        """Backward of Σ NLL · `scale` over the micro-batches (gradients all-reduced on the last one only);
        (Σ NLL, Σ entropy) times `scale`."""
        loss = entropy = 0.0
        for i, mb in enumerate(batches):
            with self.trained.accumulating(last=i == len(batches) - 1):
                with autocast(self.device, self.dtype):
                    nll = self.trained(mb)
                (nll.total * scale).backward()  # Σ over micro-batches (and ranks) = the batch's token mean
            loss, entropy = loss + float(nll.total.detach()) * scale, entropy + nll.entropy * scale
        return loss, entropy

    def evaluate(self) -> Evaluation | None:
        """Token-mean NLL (and perplexity) of the held-out rows; None when there are none."""
        c = self.config
        with autocast(self.device, self.dtype):
            result = held_out_loss(self.model, self.data.held_out, packing=c.packing, max_length=c.max_length,
                                   micro_batch_tokens=c.optim.micro_batch_tokens, pad_id=self.tokenizer.pad_token_id,
                                   world=self.world)
        if result is None:
            return None
        return Evaluation(result, {"eval_loss": result["loss"]},
                          f"held-out loss {result['loss']:.4f}   perplexity {result['perplexity']:.2f}   "
                          f"({result['tokens']} tokens)")

    def progress(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"loss": f"{metrics['loss']:.3f}", "tok_s": f"{metrics['tokens_per_second']:.0f}"}

    def write_checkpoint(self, folder: Path) -> None:
        save_pretrained(folder / paths.MODEL, self.model, self.tokenizer)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.resumed_from = self.step_count

    def summary(self, before: dict[str, Any] | None, after: dict[str, Any] | None, seconds: float,
                checkpoint: Path) -> dict[str, Any]:
        c, d = self.config, self.data
        return {
            "steps": self.step_count, "train_seconds": round(seconds, 1), "resumed_from_step": self.resumed_from,
            "model": c.model.name, "data": c.data, "train_examples": len(d.train), "held_out_examples": len(d.held_out),
            "dropped_too_long": d.dropped, "truncated": d.truncated, "packing": c.packing, "seed": c.seed,
            "before": before, "after": after, "checkpoint": str(checkpoint), "run_dir": c.output_dir,
        }
