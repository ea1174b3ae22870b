"""Everything a run needs before its first step, built from the config: model, data, rewards."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from rlvr.config import TrainConfig
from rlvr.data import TASKS, load_examples, render_prompt
from rlvr.devices import compute_dtype, resolve_device
from rlvr.errors import UserError
from rlvr.models import frozen_copy, load_model
from rlvr.records import Example
from rlvr.rewards import RewardSpec, load_reward_function
from rlvr.rewards.routing import only_where

# Rewards for prompt files when the config names none: maths data with an `answer` column.
FILE_DEFAULT_REWARDS = (("math_accuracy", 1.0), ("boxed_format", 0.1))
FILE_ACCURACY_REWARDS = ("math_accuracy", "math_accuracy_lenient")


def _routed(fn, when: dict | None, name: str):
    """The reward function, restricted to the rows its `when` selects (rewards/routing.py)."""
    return fn if when is None else only_where(fn, when, name)


def with_few_shot(prompt: str | list[dict], shots: list[tuple[str, str]]) -> str | list[dict]:
    r"""The prompt as chat messages preceded by the example exchanges (unchanged when there are none).

    >>> with_few_shot("What is 1 + 2?", [("What is 10 + 10?", "\\boxed{20}")])[1]
    {'role': 'assistant', 'content': '\\boxed{20}'}
    """
    if not shots:
        return prompt
    turns = [m for q, a in shots for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})]
    return turns + ([{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt))


@dataclass
class Prompts:
    examples: list[Example]
    texts: list[str]  # the rendered prompt each example is sampled from


@dataclass
class RunParts:
    device: torch.device
    dtype: torch.dtype  # of the forward passes (rlvr/devices.py)
    policy: torch.nn.Module
    tokenizer: object
    reference: torch.nn.Module | None
    train: Prompts
    eval: Prompts | None
    rewards: list[RewardSpec]
    accuracy_fns: tuple  # (strict, lenient) callables for held-out evaluation
    add_special_tokens: bool


def load_models(config: TrainConfig, policy_path: Path | None, reference_path: Path | None):
    """(device, forward dtype, policy in train mode, tokenizer, frozen reference or None when β = 0)."""
    m = config.model
    device = resolve_device(m.device)
    dtype = compute_dtype(m.dtype, device)
    load = lambda name: load_model(name, m.cache_dir, config.seed, m.attn_implementation)  # noqa: E731
    policy, tokenizer = load(str(policy_path) if policy_path else m.name)
    policy.to(device)
    reference = None
    if config.algorithm.beta > 0:
        if reference_path is not None:
            reference = frozen_copy(load(str(reference_path))[0])
        elif policy_path is not None:
            reference = frozen_copy(load(m.name)[0])
        else:
            reference = frozen_copy(policy)
        reference.to(device, dtype=dtype)
    if m.gradient_checkpointing:
        policy.gradient_checkpointing_enable()
    policy.train()
    return device, dtype, policy, tokenizer, reference


def build_parts(config: TrainConfig, policy_path: Path | None = None, reference_path: Path | None = None) -> RunParts:
    """Load the policy (from `policy_path` when resuming), the reference when β > 0, data and rewards."""
    device, dtype, policy, tokenizer, reference = load_models(config, policy_path, reference_path)
    task = TASKS.get(config.data.train)
    train_examples = load_examples(
        config.data.train, split="train", prompt_field=config.data.prompt_field,
        limit=config.data.train_size, seed=config.seed, difficulty=config.data.difficulty,
    )
    eval_source = config.data.eval or (config.data.train if task else None)
    eval_examples = (
        load_examples(eval_source, split="test", prompt_field=config.data.prompt_field,
                      limit=config.data.eval_size, seed=config.seed, difficulty=config.data.difficulty)
        if eval_source else None
    )
    specs = [
        RewardSpec(name, _routed(load_reward_function(name, **params), when, name), weight)
        for name, weight, params, when in (
            [(r.name, r.weight, r.params, r.when) for r in config.rewards] if config.rewards
            else [(name, weight, {}, None) for name, weight in (task.default_rewards if task else FILE_DEFAULT_REWARDS)]
        )
    ]
    if len({s.name for s in specs}) != len(specs):
        raise UserError("rewards lists the same reward function twice: merge them into one entry with the summed weight")
    strict, lenient = task.accuracy_rewards if task else FILE_ACCURACY_REWARDS
    shots = (
        [(t.prompt, t.completion) for t in config.data.few_shot] if config.data.few_shot is not None
        else list(task.few_shot) if task else []
    )
    render = lambda exs: Prompts(exs, [  # noqa: E731
        render_prompt(with_few_shot(ex.prompt, shots), template=config.data.template, tokenizer=tokenizer,
                      system_prompt=config.data.system_prompt)
        for ex in exs
    ])
    return RunParts(
        device=device,
        dtype=dtype,
        policy=policy,
        tokenizer=tokenizer,
        reference=reference,
        train=render(train_examples),
        eval=render(eval_examples) if eval_examples else None,
        rewards=specs,
        accuracy_fns=(load_reward_function(strict), load_reward_function(lenient)),
        add_special_tokens=config.data.template != "chat",
    )
