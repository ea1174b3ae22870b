"""Train a Bradley–Terry reward model on preference pairs: `train_reward_model(config)`.

    pairs ─▶ held-out split ─▶ batches of pairs ─▶ scores r_c, r_r ─▶ −log σ(r_c − r_r) ─▶ AdamW step

The run directory mirrors `rlvr train`'s: config.yaml, metrics.jsonl (loss and pairwise accuracy
per step), checkpoints/step-N/ (renamed into place, so Ctrl-C never leaves a half-written one;
model/ holds the weights, the tokenizer and the score statistics used for normalisation) and
summary.json (held-out pairwise accuracy before and after training, with 95% Wilson intervals).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from rlvr.config import RewardModelConfig
from rlvr.config import save_config
from rlvr.errors import UserError
from rlvr.evaluate.accuracy import wilson_interval
from rlvr.reward_models.bradley_terry import bradley_terry_loss, pairwise_accuracy, pairwise_wins
from rlvr.reward_models.model import encode, forward_scores, load_reward_model, score_texts
from rlvr.reward_models.pairs import PreferencePair, load_pairs, split_pairs
from rlvr.reward_models.stats import STATS_FILE, ScoreStats, score_stats
from rlvr.train import checkpoint as ckpt
from rlvr.train.loop import StopFlag, stop_on_ctrl_c
from rlvr.train.prompts import batch_order
from rlvr.train.metrics import MetricsWriter


def train_reward_model(config: RewardModelConfig, on_step_end: Callable[[int, dict[str, float], StopFlag], None] | None = None) -> dict[str, Any]:
    """Train, checkpoint and evaluate a reward model as `config` says; return (and write) the summary."""
    config.validate()
    torch.set_num_threads(config.threads or torch.get_num_threads())
    torch.manual_seed(config.seed)
    run_dir = Path(config.output_dir)
    if ckpt.latest_checkpoint(run_dir) is not None:
        raise UserError(f"{run_dir} already holds a reward model run: pick another --output-dir (or delete it)")
    train, held_out = split_pairs(load_pairs(config.data), config.eval_fraction, config.seed)
    model, tokenizer = load_reward_model(config.model.name, config.model.cache_dir, config.seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(config, run_dir / "config.yaml")
    before = held_out_accuracy(model, tokenizer, held_out, config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.optim.lr, weight_decay=config.optim.weight_decay)
    batches = batch_order(len(train), config.batch_size, total_steps(len(train), config), config.seed)
    flag, writer, step, start = StopFlag(), MetricsWriter(run_dir, tensorboard=False), 0, time.perf_counter()
    bar = tqdm(total=len(batches), desc="reward model", unit="step", dynamic_ncols=True)
    model.train()
    try:
        with stop_on_ctrl_c(flag):
            for step, indices in enumerate(batches, start=1):
                metrics = train_step(model, tokenizer, optimizer, [train[i] for i in indices], config)
                writer.write(step, metrics)
                bar.update(1)
                bar.set_postfix(loss=f"{metrics['loss']:.3f}", acc=f"{metrics['accuracy']:.2f}")
                if on_step_end is not None:
                    on_step_end(step, metrics, flag)
                if flag.stop_requested:
                    break
                if config.save_every and step % config.save_every == 0 and step < len(batches):
                    save(run_dir, step, model, tokenizer, train, config)
    finally:
        bar.close()
        writer.close()
    stats, path = save(run_dir, step, model, tokenizer, train, config)
    summary = {
        "steps": step, "stopped_early": step < len(batches), "train_seconds": round(time.perf_counter() - start, 1),
        "model": config.model.name, "data": config.data, "train_pairs": len(train), "held_out_pairs": len(held_out),
        "seed": config.seed, "before": before, "after": held_out_accuracy(model, tokenizer, held_out, config),
        "score_stats": asdict(stats), "checkpoint": str(path), "run_dir": str(run_dir),
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def train_step(model: torch.nn.Module, tokenizer: Any, optimizer: torch.optim.Optimizer, pairs: list[PreferencePair], config: RewardModelConfig) -> dict[str, float]:
    """One AdamW step on the Bradley–Terry loss of `pairs`; chosen and rejected share one forward."""
    started = time.perf_counter()
    n = len(pairs)
    ids, mask = encode(tokenizer, [p.prompt for p in pairs] * 2, [p.chosen for p in pairs] + [p.rejected for p in pairs], config.max_length)
    scores = forward_scores(model, ids, mask)  # [2n]: n chosen, then n rejected
    chosen, rejected = scores[:n], scores[n:]
    loss = bradley_terry_loss(chosen, rejected)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    clip = config.optim.max_grad_norm if config.optim.max_grad_norm > 0 else float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    chosen, rejected = chosen.detach(), rejected.detach()
    return {
        "loss": float(loss.detach()), "accuracy": pairwise_accuracy(chosen, rejected), "margin": float((chosen - rejected).mean()),
        "grad_norm": float(grad_norm), "tokens": int(mask.sum()), "step_seconds": time.perf_counter() - started,
    }


def held_out_accuracy(model: torch.nn.Module, tokenizer: Any, pairs: list[PreferencePair], config: RewardModelConfig) -> dict[str, Any] | None:
    """Pairwise accuracy on `pairs` with its 95% Wilson interval (ties count half); None if there are none."""
    if not pairs:
        return None
    prompts = [p.prompt for p in pairs]
    kw = {"max_length": config.max_length, "batch_size": 2 * config.batch_size}
    chosen = torch.tensor(score_texts(model, tokenizer, prompts, [p.chosen for p in pairs], **kw))
    rejected = torch.tensor(score_texts(model, tokenizer, prompts, [p.rejected for p in pairs], **kw))
    wins = float(pairwise_wins(chosen, rejected).sum())
    return {"n": len(pairs), "pairwise_accuracy": asdict(wilson_interval(wins, len(pairs))), "margin": float((chosen - rejected).mean())}


def measure_stats(model: torch.nn.Module, tokenizer: Any, pairs: list[PreferencePair], config: RewardModelConfig) -> ScoreStats:
    """Mean and std of the scores of the training completions, chosen and rejected (a seeded
    sample of `config.stats_completions` of them, or all when 0)."""
    items = [(p.prompt, c) for p in pairs for c in (p.chosen, p.rejected)]
    if config.stats_completions and len(items) > config.stats_completions:
        items = random.Random(config.seed).sample(items, config.stats_completions)
    scores = score_texts(
        model, tokenizer, [p for p, _ in items], [c for _, c in items], max_length=config.max_length, batch_size=2 * config.batch_size
    )
    return score_stats(scores, config.max_length)


def save(run_dir: Path, step: int, model: torch.nn.Module, tokenizer: Any, train: list[PreferencePair], config: RewardModelConfig) -> tuple[ScoreStats, Path]:
    """Checkpoint step `step` atomically, its score statistics inside model/."""
    stats = measure_stats(model, tokenizer, train, config)
    path = ckpt.save_checkpoint(
        run_dir, step, policy=model, tokenizer=tokenizer, trainer_state={"step": step}, config=config,
        extra_files={f"model/{STATS_FILE}": stats.to_json()},
    )
    return stats, path


def total_steps(n_train: int, config: RewardModelConfig) -> int:
    """max_steps, or the steps `epochs` passes over n_train pairs take."""
    return config.max_steps or config.epochs * -(-n_train // config.batch_size)
