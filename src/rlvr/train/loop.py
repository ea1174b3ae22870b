"""The outer loop around Trainer.step(): evaluation before/after, progress, checkpoints, Ctrl-C, summary.json."""

from __future__ import annotations

import json
import signal
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable

from tqdm import tqdm

from rlvr.config import save_config
from rlvr.errors import UserError
from rlvr.evaluate import paired_gain_interval
from rlvr.train.metrics import MetricsWriter

if TYPE_CHECKING:
    from rlvr.train.trainer import Trainer


@contextmanager
def stop_on_ctrl_c(trainer: "Trainer | StopFlag"):
    """First Ctrl-C: finish the step, save, exit cleanly. Second: abort at once (the last
    checkpoint on disk is still whole, because checkpoints are renamed into place)."""

    def handler(signum, frame):
        if trainer.stop_requested:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        trainer.request_stop()
        tqdm.write("Ctrl-C: finishing this step and saving a checkpoint (Ctrl-C again to abort without saving)")

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: no handler, Ctrl-C behaves as usual
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _eval(trainer: "Trainer", name: str) -> dict | None:
    path = trainer.run_dir / f"eval_{name}.json"
    if path.is_file():  # already measured by an earlier (resumed) session of this run
        return json.loads(path.read_text())
    tqdm.write(f"evaluating {name} training…")
    result = trainer.evaluate()
    if result is None:
        return None
    record = {**result.summary(), "strict_correct": result.strict_correct, "lenient_correct": result.lenient_correct,
              "examples": result.completions[:5]}
    path.write_text(json.dumps(record, indent=1))
    tqdm.write(f"  {name}: strict {result.strict}   lenient {result.lenient}   (n={len(result.strict_correct)})")
    return record


def _periodic_eval(trainer: "Trainer") -> dict[str, float]:
    """Held-out accuracy during training, for the metrics log (summary.json keeps before/after)."""
    result = trainer.evaluate()
    if result is None:
        return {}
    tqdm.write(f"  step {trainer.step_count} held-out: strict {result.strict}   lenient {result.lenient}")
    return {"eval/strict": result.strict.mean, "eval/lenient": result.lenient.mean}


def _record_groups(trainer: "Trainer", step: int, groups: int = 2) -> None:
    """Append the first groups of the step to samples.jsonl: prompt, completions, rewards, advantages."""
    batch, r = trainer.last_batch, trainer.last_batch.rollout
    g = r.group_size
    with (trainer.run_dir / "samples.jsonl").open("a", encoding="utf-8") as f:
        for p in range(min(groups, r.num_prompts)):
            rows = range(p * g, (p + 1) * g)
            f.write(json.dumps({
                "step": step, "prompt": r.examples[p].prompt, "completions": [r.completions[i] for i in rows],
                "rewards": batch.scored.rewards[p].tolist(),
                "advantages": [float(batch.advantages[i].flatten()[0]) for i in rows],  # per token: the first token's
                "tokens": r.lengths[p * g:(p + 1) * g].tolist(),
            }, ensure_ascii=False) + "\n")


def _show_samples(trainer: "Trainer", step: int, k: int = 4) -> None:
    _record_groups(trainer, step)
    batch = trainer.last_batch
    r = batch.rollout
    tqdm.write(f"── samples at step {step}: prompt {r.examples[0].prompt!r:.120}")
    for i in range(min(k, r.group_size)):
        text = r.completions[i].replace("\n", "⏎")
        tqdm.write(f"  reward {float(batch.scored.rewards.view(-1)[i]):+.2f}  advantage {float(batch.advantages[i].flatten()[0]):+.2f}  {text[:160]!r}")


def _summary(trainer: "Trainer", before: dict | None, after: dict | None, seconds: float) -> dict:
    c = trainer.config
    summary = {
        "steps": trainer.step_count, "train_seconds": round(seconds, 1), "model": c.model.name, "task": c.data.train,
        "template": c.data.template, "max_new_tokens": c.eval_max_new_tokens or c.generation.max_new_tokens,
        "eval_decoding": "greedy", "seed": c.seed, "before": before, "after": after,
    }
    if before and after:
        summary["gain"] = {
            mode: paired_gain_interval(before[f"{mode}_correct"], after[f"{mode}_correct"]).__dict__ for mode in ("strict", "lenient")
        }
    for block in ("before", "after"):
        if summary[block]:
            summary[block] = {k: v for k, v in summary[block].items() if not k.endswith("_correct") and k != "examples"}
    return summary


def run_training(trainer: "Trainer", on_step_end: Callable[["Trainer", dict], None] | None = None) -> dict:
    c = trainer.config
    trainer.run_dir.mkdir(parents=True, exist_ok=True)
    if trainer.step_count == 0:  # a fresh run (Trainer refuses one over a checkpointed run): nothing stale is appended to
        for name in ("metrics.jsonl", "samples.jsonl", "eval_before.json"):
            (trainer.run_dir / name).unlink(missing_ok=True)
    save_config(c, trainer.run_dir / "config.yaml")
    # a resumed run reuses the "before" measured when it started; it cannot measure it again
    measured = (trainer.run_dir / "eval_before.json").is_file()
    before = _eval(trainer, "before") if measured or (c.eval_before and trainer.step_count == 0) else None
    writer = MetricsWriter(trainer.run_dir)
    start = time.perf_counter()
    bar = tqdm(total=c.max_steps, initial=trainer.step_count, desc="GRPO", unit="step", dynamic_ncols=True)
    try:
        with stop_on_ctrl_c(trainer):
            while trainer.step_count < c.max_steps and not trainer.stop_requested:
                step_before = trainer.step_count
                try:
                    metrics = trainer.step()
                    if c.eval_every and trainer.step_count % c.eval_every == 0:
                        metrics.update(_periodic_eval(trainer))
                except UserError:
                    if trainer.step_count == step_before and step_before > 0:
                        path = trainer.save()  # the weights are those of the last finished step
                        tqdm.write(f"progress saved to {path}; fix the problem and continue with --resume {trainer.run_dir}")
                    raise
                writer.write(trainer.step_count, metrics)
                bar.update(1)
                bar.set_postfix(reward=f"{metrics['reward/mean']:.2f}", acc=f"{metrics.get('accuracy', float('nan')):.2f}",
                                len=f"{metrics['completion_length/mean']:.0f}", s=f"{metrics['step_seconds']:.0f}")
                if c.sample_every and trainer.step_count % c.sample_every == 0:
                    _show_samples(trainer, trainer.step_count)
                if c.save_every and trainer.step_count % c.save_every == 0:
                    trainer.save()
                if on_step_end is not None:
                    on_step_end(trainer, metrics)
    finally:
        bar.close()
        writer.close()
    path = trainer.save()
    if trainer.stop_requested and trainer.step_count < c.max_steps:
        tqdm.write(f"stopped at step {trainer.step_count}; checkpoint {path}; continue with: rlvr train --resume {trainer.run_dir}")
        return {"stopped_at": trainer.step_count, "checkpoint": str(path)}
    after = _eval(trainer, "after") if c.eval_after else None
    summary = _summary(trainer, before, after, time.perf_counter() - start)
    (trainer.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


class StopFlag:
    """Set by the first Ctrl-C (see rlvr.train.loop.stop_on_ctrl_c): finish the step, save, return."""

    def __init__(self) -> None:
        self.stop_requested = False

    def request_stop(self) -> None:
        self.stop_requested = True
