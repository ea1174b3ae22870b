"""The held-out evaluation of a GRPO or PPO run, and how it is shown: metrics, the console line, summary.json.

    evaluation = held_out(sampler, parts, config, step, world)   # greedy, strict and lenient, 95% intervals
    eval_metrics(evaluation), describe(evaluation)                # eval/strict …, one line: its Evaluation record
    summary(config, parts, step, before, after, seconds)          # summary.json: before, after, paired gain
    verdicts(parts, before, after)                                # heldout.json: each problem's, for rlvr compare
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from rlvr.config import TrainConfig
from rlvr.distributed.world import World
from rlvr.evaluate.accuracy import Interval, evaluate_accuracy, paired_gain_interval
from rlvr.rewards.control import DESCRIPTIONS as CONTROL_DESCRIPTIONS
from rlvr.rl.build import Prompts, RunParts
from rlvr.samplers import Sampler


def held_out(sampler: Sampler, parts: RunParts, config: TrainConfig, step: int,
             world: World) -> dict[str, Any] | None:
    """Greedy held-out accuracy after `step` steps, strict and lenient, with 95% intervals and each problem's
    verdict; when the prompts show example exchanges, also of the questions alone (`alone`: what was learned,
    not shown); with a validation slice, its accuracy (what keep_best chooses by). None: no held-out set."""
    if parts.eval is None:
        return None
    evaluation = accuracy(sampler, parts, config, parts.eval, world)
    ends = step in (0, config.max_steps)  # before and after; between, when asked
    if parts.eval_alone is not None and (ends or config.eval_alone_every):
        alone = accuracy(sampler, parts, config, parts.eval_alone, world)
        evaluation["alone"] = {k: v for k, v in alone.items() if k != "examples"}
    if parts.validation is not None:
        validation = accuracy(sampler, parts, config, parts.validation, world)
        evaluation["validation"] = {k: validation[k] for k in ("n", "strict", "lenient")}
    return evaluation


def accuracy(sampler: Sampler, parts: RunParts, config: TrainConfig, prompts: Prompts,
             world: World) -> dict[str, Any]:
    """Greedy, through `sampler` (in conversation with the environment when there is one, the environments
    seeded the same at every evaluation, so before and after are paired)."""
    assert parts.accuracy_fns is not None  # (held-out prompts come with their verdicts: rlvr.rl.heldout)
    strict, lenient = parts.accuracy_fns
    result = evaluate_accuracy(sampler, prompts, strict=strict, lenient=lenient, seed=config.seed, world=world,
                               max_new_tokens=config.eval_max_new_tokens or config.max_new_tokens)
    return {**result.summary(), "strict_correct": result.strict_correct, "lenient_correct": result.lenient_correct,
            "examples": result.completions[:5]}


def eval_metrics(evaluation: dict[str, Any]) -> dict[str, float]:
    """The logged numbers; also of the questions without the example exchanges and of the validation slice."""
    return {"eval/strict": evaluation["strict"]["mean"], "eval/lenient": evaluation["lenient"]["mean"],
            **{f"eval/{part}/{mode}": evaluation[part][mode]["mean"] for part in ("alone", "validation")
               if part in evaluation for mode in ("strict", "lenient")}}


def describe(evaluation: dict[str, Any]) -> str:
    """The console's line."""
    line = (f"strict {Interval(**evaluation['strict'])}   lenient {Interval(**evaluation['lenient'])}   "
            f"(n={evaluation['n']}, held-out, greedy)")
    if "alone" in evaluation:
        a = evaluation["alone"]
        line += f"; the question alone: strict {Interval(**a['strict'])}   lenient {Interval(**a['lenient'])}"
    if "validation" in evaluation:
        v = evaluation["validation"]
        line += f"; validation (n={v['n']}): strict {Interval(**v['strict'])}"
    return line


def summary(config: TrainConfig, parts: RunParts, steps: int, before: dict[str, Any] | None,
            after: dict[str, Any] | None, seconds: float) -> dict[str, Any]:
    """summary.json: the held-out accuracy before and after, and the paired gain with its interval."""
    c = config
    head: dict[str, Any] = {
        "steps": steps, "train_seconds": round(seconds, 1), "model": c.model.name, "task": c.data.train,
        "template": c.data.template, "max_new_tokens": c.eval_max_new_tokens or c.generation.max_new_tokens,
        "eval_decoding": "greedy", "seed": c.seed, "before": _headline(before),
    }
    result = compared(before, after)
    skipped = {"heldout_skipped": parts.heldout_skipped} if parts.heldout_skipped else {}
    if c.control != "none":  # what a control run controls for (rlvr.rewards.control)
        head["control"] = {"kind": c.control, "trained_on": CONTROL_DESCRIPTIONS[c.control]}
    return {**head, "after": result["heldout"], **({"gain": result["gain"]} if "gain" in result else {}), **skipped}


def verdicts(parts: RunParts, before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    """heldout.json: which held-out problems (their rows, and a digest of their prompts) and each one's greedy
    verdict before and after, strict and lenient (1 = correct), also of the questions alone: what `rlvr compare`
    pairs a run and its control by."""
    def of(evaluation: dict[str, Any] | None) -> dict[str, Any] | None:
        if evaluation is None:
            return None
        alone = {"alone": of(evaluation["alone"])} if "alone" in evaluation else {}
        return {mode: [int(v) for v in evaluation[f"{mode}_correct"]] for mode in ("strict", "lenient")} | alone

    rows = [p.example.index for p in parts.eval] if parts.eval else []
    prompts = json.dumps([p.example.prompt for p in parts.eval or []], sort_keys=True, default=str)
    return {"rows": rows, "problems": hashlib.sha256(prompts.encode()).hexdigest()[:16], "before": of(before),
            "after": of(after)}


def compared(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    """An evaluation's held-out accuracy, and its paired gain over `before` (also of the questions alone)."""
    result: dict[str, Any] = {"heldout": _headline(after)}
    if before and after:
        result["gain"] = _gain(before, after)
        if "alone" in before and "alone" in after:  # the same questions without the example exchanges
            result["gain"]["alone"] = _gain(before["alone"], after["alone"])
    return result


def _gain(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The paired gain, strict and lenient, with its 95% interval."""
    return {mode: paired_gain_interval(before[f"{mode}_correct"], after[f"{mode}_correct"]).__dict__
            for mode in ("strict", "lenient")}


def _headline(evaluation: dict[str, Any] | None) -> dict[str, Any] | None:
    """An evaluation without its per-problem verdicts and examples (its `alone` part likewise)."""
    if evaluation is None:
        return None
    return {k: _headline(v) if k == "alone" else v for k, v in evaluation.items()
            if not k.endswith("_correct") and k != "examples"}
