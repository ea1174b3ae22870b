"""Everything a GRPO run needs before its first step, built from the config: models, prompts, rewards."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import torch

from rlvr import paths
from rlvr.config import DataConfig, RewardConfig, TrainConfig
from rlvr.data import expected_format, find_task, load_examples, render_prompt, with_few_shot
from rlvr.data.lengths import budget_words, prompt_limit, refuse_too_long, too_long
from rlvr.data.scoring import MATH, verifier_for_columns
from rlvr.data.sources import cut_short, with_every_column
from rlvr.data.tasks.gym import is_gym
from rlvr.data.trl_form import trl_form
from rlvr.distributed.world import World
from rlvr.errors import UserError
from rlvr.models import frozen_copy, load_configured, load_model
from rlvr.records import Example
from rlvr.rewards import RewardSpec, load_reward_function
from rlvr.rl.heldout import Judge, heldout_judge
from rlvr.rl.memory import plan_before_loading
from rlvr.rl.reward_setup import run_rewards
from rlvr.samplers import Prompt

Prompts = list[Prompt]  # each row with its rendered text and, with the chat template, its chat turns


@dataclass
class RunParts:
    device: torch.device
    dtype: torch.dtype  # of the forward passes (rlvr.models.devices)
    policy: torch.nn.Module
    tokenizer: Any
    reference: torch.nn.Module | None
    train: Prompts
    eval: Prompts | None
    eval_alone: Prompts | None  # the held-out questions without the example exchanges (None: there are none)
    validation: Prompts | None  # held-out prompts apart from `eval`, that keep_best chooses by (None: none)
    rewards: list[RewardSpec]
    reward_entries: list[RewardConfig]  # the rewards as run, each one's `correctness` decided (the effective config)
    correctness: str | None  # the reward logged as `accuracy` and followed by the curriculum (rlvr.rl.reward_setup)
    accuracy_fns: Judge | None  # (strict, lenient) verdicts of held-out answers (rlvr.rl.heldout); None: none
    heldout_skipped: str | None  # why no held-out set is evaluated, in words (None: one is)
    format_check: Callable[..., Any]  # the format reward the template asks for
    add_special_tokens: bool
    memory_plan: str | None = None  # the plan made before the model loaded, in one line (rlvr.rl.memory)


def load_models(
    config: TrainConfig, checkpoint: Path | None
) -> tuple[torch.device, torch.dtype, torch.nn.Module, Any, torch.nn.Module | None]:
    """(device, forward dtype, policy in train mode, tokenizer, frozen reference or None when β = 0).

    From `checkpoint` when resuming: its policy, and its reference when the run refreshed it (else the
    starting model, which the reference is until a refresh)."""
    m = config.model
    policy_source = str(checkpoint / paths.MODEL) if checkpoint else None
    policy, tokenizer, device, dtype = load_configured(m, config.seed, policy_source)
    reference = None  # (with LoRA, the policy with its adapters off: rlvr.grpo.trainer)
    if config.algorithm.beta > 0 and not m.lora:
        refreshed = checkpoint is not None and (checkpoint / paths.REFERENCE).is_dir()
        source = str(checkpoint / paths.REFERENCE) if refreshed and checkpoint is not None else m.name
        reference = frozen_copy(policy if checkpoint is None
                                else load_model(source, m.cache_dir, config.seed, m.attn_implementation)[0])
        reference.to(device, dtype=dtype)
    return device, dtype, policy, tokenizer, reference


def _shown(row: int, share: float) -> bool:
    """Whether row `row` gets the example exchanges when a `share` of the rows do, spread evenly.

    >>> [_shown(i, 0.5) for i in range(4)], sum(_shown(i, 0.25) for i in range(100))
    ([False, True, False, True], 25)
    """
    return math.floor((row + 1) * share) > math.floor(row * share)


def build_parts(config: TrainConfig, checkpoint: Path | None = None) -> RunParts:
    """Data and rewards, checked against each other; the memory plan; the models (slow); the prompts, rendered."""
    d, task = config.data, find_task(config.data.train)
    load: Callable[[str, str, int | None], list[Example]] = lambda source, split, limit: load_examples(  # noqa: E731
        source, split=split, prompt_field=d.prompt_field, limit=limit, seed=config.seed, difficulty=d.difficulty)
    train_examples = with_every_column(_training_rows(config, load))
    eval_source = heldout_source(d)
    held = load(eval_source, "test", d.eval_size + d.validation_size) if eval_source else None
    eval_examples, validation_examples = _split_validation(held, d.eval_size, d.validation_size, eval_source)
    _say_cut(d, len(train_examples), eval_source, len(held or []))
    # a file's rows are code or maths by their columns; rows with neither are scored by the config's rewards,
    # and judged held-out by its correctness reward (rlvr.rl.heldout)
    kind = task.scoring if task else verifier_for_columns(train_examples[0].columns if train_examples else ())
    # in TRL's form (chat messages, `solution`), so reward functions written for TRL run unchanged
    train_examples = trl_form(train_examples, chat=d.template == "chat")
    eval_examples = trl_form(eval_examples, chat=d.template == "chat") if eval_examples else eval_examples
    validation_examples = trl_form(validation_examples, chat=d.template == "chat") if validation_examples else None
    rewards = run_rewards(config, kind or MATH, train_examples, d.train)  # before the model: its mistakes are quick
    heldout = heldout_judge(config, kind, rewards, eval_examples, eval_source)
    if heldout.judge is None:
        eval_examples = validation_examples = None
    if heldout.judge is None and World.from_env().is_main:  # (evaluations switched off are the config's own say)
        print(f"rlvr: no held-out evaluation: {heldout.skipped}", file=sys.stderr)
    shots = ([(t.prompt, t.completion) for t in d.few_shot] if d.few_shot is not None
             else list(task.few_shot) if task else [])
    plan = plan_before_loading(config, [ex.prompt for ex in train_examples], shots, World.from_env().size)
    device, dtype, policy, tokenizer, reference = load_models(config, checkpoint)
    def render(exs: list[Example], shown: list[tuple[str, str]] = shots, share: float = 1.0) -> Prompts:
        asked = [with_few_shot(ex.prompt, shown if _shown(i, share) else []) for i, ex in enumerate(exs)]
        system = [{"role": "system", "content": d.system_prompt}] if d.system_prompt else []
        return [Prompt(ex, render_prompt(q, template=d.template, tokenizer=tokenizer, system_prompt=d.system_prompt),
                       [*system, *q] if d.template == "chat" and isinstance(q, list) else None)
                for ex, q in zip(exs, asked)]

    specials, new_tokens = d.template != "chat", config.generation.max_new_tokens or 0
    share = (d.few_shot_share if d.few_shot_share is not None
             else task.few_shot_share if task and d.few_shot is None else 1.0)
    train = fitting(render(train_examples, shots, share), tokenizer,
                    prompt_limit(policy, new_tokens, d.max_prompt_tokens), specials, d.train)
    held_out = render(eval_examples) if eval_examples else None
    validation = render(validation_examples) if validation_examples else None
    for prompts in (held_out, validation):  # a held-out set that silently shrank would not be the same measurement
        if prompts is not None:
            budget = config.eval_max_new_tokens or new_tokens
            why, fix = ((f"data.max_prompt_tokens={d.max_prompt_tokens}", "raise data.max_prompt_tokens")
                        if d.max_prompt_tokens is not None else
                        (budget_words(policy, budget), "lower eval_max_new_tokens (or generation.max_new_tokens)"))
            refuse_too_long([p.text for p in prompts], [f"held-out row {p.example.index + 1} of {eval_source}"
                                                        for p in prompts],
                            tokenizer, prompt_limit(policy, budget, d.max_prompt_tokens), specials, why=why, fix=fix)
    return RunParts(
        device=device, dtype=dtype, policy=policy, tokenizer=tokenizer, reference=reference,
        train=train, eval=held_out,
        eval_alone=render(eval_examples, []) if held_out and shots and eval_examples else None,
        validation=validation,
        rewards=rewards.specs, reward_entries=rewards.entries, correctness=rewards.correctness,
        accuracy_fns=heldout.judge, heldout_skipped=heldout.skipped,
        format_check=load_reward_function(expected_format(d.template)),
        add_special_tokens=specials, memory_plan=plan,
    )


def with_environment_data(config: TrainConfig) -> TrainConfig:
    """A verifiers environment trains on its own dataset when data.train is left at its default (rlvr.harness)."""
    from rlvr.adapters import verifiers_env
    from rlvr.user_code import registered

    env, d = config.environment, config.data
    given = isinstance(env.name, str) and verifiers_env.is_verifiers(registered(env.name))
    if not (isinstance(env.name, str) and (verifiers_env.is_verifiers(env.name) or given)
            and d.train == DataConfig.train):
        return config
    query = urlencode({k: json.dumps(v) for k, v in env.params.items()})
    name = f"{verifiers_env.PREFIX}{env.name}" if given else env.name
    source = name + (("&" if "?" in name else "?") + query if query else "")
    return dataclasses.replace(config, data=dataclasses.replace(d, train=source))


def heldout_source(d: DataConfig) -> str | None:
    """Where a run's held-out rows come from: data.eval, else a built-in task's or a verifiers environment's own
    held-out split of data.train; None when there is none (a file's rows, rows given from Python)."""
    return d.eval or (d.train if find_task(d.train) or _has_eval_rows(d.train) else None)


def _has_eval_rows(source: str) -> bool:
    """Whether a verifiers environment's source has held-out rows of its own (its eval_dataset)."""
    from rlvr.adapters import verifiers_env

    return source.startswith(verifiers_env.PREFIX) and verifiers_env.load(source).eval_dataset is not None


def _training_rows(config: TrainConfig, load: Callable[[str, str, int | None], list[Example]]) -> list[Example]:
    """The training rows (`load`ed); a reasoning-gym task's under data.curriculum: data.train_size of them spread
    evenly over its levels 1..data.difficulty (each row's `difficulty` column its level), in order of level, so
    that the curriculum, which draws by pass rate, starts on the levels the model half-solves and moves up as
    they are solved (the held-out rows stay at data.difficulty)."""
    d = config.data
    if not (d.curriculum and is_gym(d.train)):
        return load(d.train, "train", d.train_size)
    from rlvr.data.tasks.gym import check

    check(d.train, d.difficulty)  # (its top level first: the levels below exist if it does)
    each, extra = divmod(d.train_size, d.difficulty)
    shares = [each + (level <= extra) for level in range(1, d.difficulty + 1)]
    rows = [row for level, share in enumerate(shares, start=1) if share
            for row in load_examples(d.train, split="train", prompt_field=d.prompt_field, limit=share,
                                     seed=config.seed, difficulty=level)]
    return [dataclasses.replace(row, index=i) for i, row in enumerate(rows)]


def _say_cut(d: Any, train_rows: int, eval_source: str | None, held_rows: int) -> None:
    """A line for each data file longer than its size setting lets through (rlvr.data.sources.cut_short)."""
    cut = [cut_short(d.train, train_rows, "data.train_size", d.train_size),
           cut_short(eval_source, held_rows, "data.eval_size" + " + data.validation_size" * bool(d.validation_size),
                     d.eval_size + d.validation_size)]
    for line in cut if World.from_env().is_main else []:
        if line is not None:
            print(line, file=sys.stderr)


def _split_validation(held: list[Example] | None, eval_size: int, validation_size: int,
                      source: str | None) -> tuple[list[Example] | None, list[Example] | None]:
    """The held-out rows as (evaluated, validation): the first `eval_size`, then the next `validation_size`."""
    if not validation_size:
        return held, None
    if held is None:
        raise UserError("data.validation_size needs held-out prompts: give data.eval (a file), or a built-in task")
    if len(held) < eval_size + validation_size:
        raise UserError(f"{source} has {len(held)} held-out rows, fewer than data.eval_size + data.validation_size "
                        f"= {eval_size + validation_size}: lower one of them")
    return held[:eval_size], held[eval_size:]


def fitting(prompts: Prompts, tokenizer: Any, limit: int | None, add_special_tokens: bool, source: str) -> Prompts:
    """`prompts` without those over `limit` tokens, saying how many were skipped; none left is an error."""
    over = too_long([p.text for p in prompts], tokenizer, limit, add_special_tokens)
    if not over:
        return prompts
    first = prompts[min(over)].example.index + 1
    where = f"{len(over)} of {len(prompts)} training prompts longer than {limit} tokens"
    if len(over) == len(prompts):
        raise UserError(f"all {where} (the first is row {first} of {source}): shorten them, or raise "
                        "data.max_prompt_tokens (at most the model's context less generation.max_new_tokens)")
    print(f"rlvr: skipped {where} (the first is row {first} of {source}, {over[min(over)]}+ tokens); "
          "data.max_prompt_tokens sets the limit", file=sys.stderr)
    return [p for i, p in enumerate(prompts) if i not in over]
