"""Train a Bradley–Terry reward model on preference pairs, as a recipe of the run core: `train_reward_model(config)`.

    pairs ─▶ held-out split ─▶ batches of pairs ─▶ scores r_c, r_r ─▶ −log σ(r_c − r_r) ─▶ AdamW step

The run directory is `rlvr train`'s (rlvr.paths): config.yaml, metrics.jsonl (loss and pairwise
accuracy per step), tensorboard/, checkpoints/step-N/ (model/ holds the weights, the tokenizer and
the score statistics used for normalisation) and summary.json (held-out pairwise accuracy before and
after training, with 95% Wilson intervals). `--resume` continues a run exactly, as for every recipe.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from rlvr import paths
from rlvr.config import RewardModelConfig
from rlvr.config.sections import REPLICATED
from rlvr.distributed.parallel import Trained
from rlvr.distributed.world import SINGLE, World, gather_across, map_sharded
from rlvr.errors import UserError
from rlvr.evaluate.accuracy import wilson_interval
from rlvr.models import adapt, set_checkpointing
from rlvr.models.devices import autocast, compute_dtype, resolve_device
from rlvr.models.reward_model import (
    STATS_FILE,
    ScoreStats,
    encode,
    forward_scores,
    load_reward_model,
    score_stats,
    score_texts,
)
from rlvr.records import Evaluation
from rlvr.reward_models.bradley_terry import bradley_terry_loss, pairwise_accuracy, pairwise_wins
from rlvr.reward_models.pairs import PreferencePair, load_pairs, split_pairs
from rlvr.run.checkpoint import save_pretrained
from rlvr.run.loop import OnStepEnd, StepResult, launch
from rlvr.run.supervised import SupervisedRecipe, rows_digest


def train_reward_model(config: RewardModelConfig, *, resume: bool = False, on_step_end: OnStepEnd | None = None,
                       overwrite: bool = False) -> dict[str, Any]:
    """Train a reward model as `config` says (`resume`: continue the run in config.output_dir; `overwrite`: start
    afresh over the run it holds); return its summary."""
    return launch(RewardModelTrainer, config, resume=resume, on_step_end=on_step_end, overwrite=overwrite)


class RewardModelTrainer(SupervisedRecipe):
    resume_hint, label, job = "rlvr rm --resume {run_dir}", "reward model", "rm"
    command, unit, state_key, same_rows = "rlvr rm", "pairs", "train_pairs", "the same data and eval_fraction"

    def __init__(self, config: RewardModelConfig, checkpoint: Path | None = None, world: World = SINGLE):
        """The pairs (read before the model: a bad row fails in a second), the model and the plan of steps."""
        self.config, c, self.world = config, config, world
        self.refuse_sharding(c.distributed.strategy, world)
        self.train, self.held_out = split_pairs(load_pairs(c.data), c.eval_fraction, c.seed)
        self.device = resolve_device(c.model.device)
        self.dtype = compute_dtype(c.model.dtype, self.device)
        source = str(checkpoint / paths.MODEL) if checkpoint else c.model.name
        self.model, self.tokenizer = load_reward_model(source, c.model.cache_dir, c.seed, c.model.attn_implementation,
                                                       trainable_adapters=c.model.lora is not None and bool(checkpoint))
        if c.model.gradient_checkpointing:
            set_checkpointing(self.model, True)
        self.model = adapt(self.model, c.model, task="SEQ_CLS")  # with model.lora: adapters and the head train
        self.model.to(self.device).train()
        self.plan_steps(self.model, c, rows=len(self.train),
                        digest=rows_digest([(p.prompt, p.chosen, p.rejected) for p in self.train]))
        self.trained = Trained(self.model, world, REPLICATED, self.device, self.dtype)  # what the step runs

    def step(self) -> StepResult:
        """One AdamW step on the Bradley–Terry loss of the step's pairs; chosen and rejected share one forward.

        Data-parallel, each rank takes its share of the pairs and weighs its loss by its share of the
        global count (times the world size: DDP averages gradients); a rank whose share is empty runs
        one pair weighted 0, so that it still meets the all-reduce. The metrics are the global batch's."""
        started, c, world = time.perf_counter(), self.config, self.world
        chosen_ids = self.plan[self.step_count]
        mine, weight = self.my_share()
        pairs: list[PreferencePair] = [self.train[i] for i in mine]
        n = len(pairs)
        ids, mask = encode(self.tokenizer, [p.prompt for p in pairs] * 2,
                           [p.chosen for p in pairs] + [p.rejected for p in pairs], c.max_length)
        with autocast(self.device, self.dtype):
            scores = forward_scores(self.trained.runner, ids, mask).float()  # [2n]: n chosen, then n rejected
        chosen, rejected = scores[:n], scores[n:]
        loss = bradley_terry_loss(chosen, rejected) * (weight * n * world.size / len(chosen_ids))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        update = self.trained.optimizer_step(self.optimizer, self.scheduler, c.optim.max_grad_norm)
        self.step_count += 1
        parts = gather_across((chosen.detach().cpu(), rejected.detach().cpu(), weight, int(mask.sum())), world)
        kept = [(c, r) for c, r, w, _ in parts if w]
        chosen, rejected = torch.cat([c for c, _ in kept]), torch.cat([r for _, r in kept])
        return StepResult({
            "loss": float(bradley_terry_loss(chosen, rejected)), "accuracy": pairwise_accuracy(chosen, rejected),
            "margin": float((chosen - rejected).mean()), "grad_norm": update["grad_norm"],
            "tokens": sum(p[3] for p in parts if p[2]), "step_seconds": time.perf_counter() - started,
        })

    def evaluate(self) -> Evaluation | None:
        """Pairwise accuracy on the held-out pairs with its 95% Wilson interval (ties count half); None if
        there are none. Data-parallel, each rank scores its share."""
        if not self.held_out:
            return None
        both = map_sharded(lambda pairs: list(zip(self.scores([p.prompt for p in pairs], [p.chosen for p in pairs]),
                                                  self.scores([p.prompt for p in pairs], [p.rejected for p in pairs]),
                                                  strict=True)), self.held_out, self.world)
        chosen, rejected = torch.tensor([c for c, _ in both]), torch.tensor([r for _, r in both])
        wins = float(pairwise_wins(chosen, rejected).sum())
        accuracy = wilson_interval(wins, len(self.held_out))
        result = {"n": len(self.held_out), "pairwise_accuracy": asdict(accuracy),
                  "margin": float((chosen - rejected).mean())}
        return Evaluation(result, {"eval/pairwise_accuracy": accuracy.mean},
                          f"held-out pairwise accuracy {100 * accuracy.mean:.1f}% [{100 * accuracy.low:.1f}, "
                          f"{100 * accuracy.high:.1f}] (n={len(self.held_out)})")

    def scores(self, prompts: list[Any], completions: list[str]) -> list[float]:
        with autocast(self.device, self.dtype):
            return score_texts(self.model, self.tokenizer, prompts, completions, max_length=self.config.max_length,
                               batch_size=2 * self.config.batch_size)

    def measure_stats(self) -> ScoreStats:
        """Mean and std of the scores of the training completions, chosen and rejected (a seeded
        sample of `stats_completions` of them, or all when 0)."""
        c = self.config
        items = [(p.prompt, completion) for p in self.train for completion in (p.chosen, p.rejected)]
        if c.stats_completions and len(items) > c.stats_completions:
            items = random.Random(c.seed).sample(items, c.stats_completions)
        return score_stats(self.scores([p for p, _ in items], [x for _, x in items]), c.max_length)

    def progress(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"loss": f"{metrics['loss']:.3f}", "acc": f"{metrics['accuracy']:.2f}"}

    def write_checkpoint(self, folder: Path) -> None:
        """model/: weights, tokenizer and the score statistics that normalise the reward (measured now)."""
        save_pretrained(folder / paths.MODEL, self.model, self.tokenizer)
        (folder / paths.MODEL / STATS_FILE).write_text(self.measure_stats().to_json())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "optimizer" not in state:
            raise UserError("cannot resume: this checkpoint was written by an rlvr that did not save the reward "
                            "model's optimizer; train it again (its model/ folder still works as a reward)")
        super().load_state_dict(state)

    def summary(self, before: dict[str, Any] | None, after: dict[str, Any] | None, seconds: float,
                checkpoint: Path) -> dict[str, Any]:
        c = self.config
        stats = json.loads((checkpoint / paths.MODEL / STATS_FILE).read_text())
        return {
            "steps": self.step_count, "train_seconds": round(seconds, 1), "model": c.model.name, "data": c.data,
            "train_pairs": len(self.train), "held_out_pairs": len(self.held_out), "seed": c.seed, "before": before,
            "after": after, "score_stats": stats, "checkpoint": str(checkpoint), "run_dir": c.output_dir,
        }
