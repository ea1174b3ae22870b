"""A step's harness rollouts as one Rollout record: G runs of the agent per prompt, their turns as rows.

    examples ─▶ run_rollouts (the agent against the Endpoint) ─▶ HarnessRollout per trajectory ─▶ Rollout

Trajectory p·G + j is run j of prompt p, drawing from completion seed j of its group (rlvr.seeds). A
trajectory whose agent kept its history whole is one row; one whose agent rewrote it between turns is several
(rlvr.harness.rows), sharing its reward (`Rollout.row_trajectory`; `row_turns` numbers the turn
each token was sampled in, `turn_rewards` holds what the agent reported for them); each row continues its own
prompt ids (`row_prompt`: rows that begin with the same ids share one). Every id is one the sampler was sent
or drew: nothing is tokenised again. A trajectory that produced no row (its agent failed before its first
request) keeps one empty row, so that it is still there, unscored.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch

from rlvr.errors import UserError
from rlvr.harness.endpoint import Endpoint
from rlvr.harness.group import Agent, HarnessRollout, run_rollouts
from rlvr.harness.rows import Segment
from rlvr.records import Example, Rollout
from rlvr.rewards.batch import completion_token_ids
from rlvr.rollout import SamplingParams, left_pad
from rlvr.samplers.protocol import Sampler


def agent_row(example: Example) -> dict[str, Any]:
    """What the agent function gets as its row: the prompt (text or messages) and every other column."""
    return {"prompt": example.prompt, **example.columns}


def sample_harness(fn: Callable[..., Any] | Agent, sampler: Sampler, tokenizer: Any, examples: list[Example],
                   seeds: list[list[int]], params: SamplingParams, timeout_s: float,
                   name: str = "the agent function", **endpoint: Any) -> Rollout:
    """G runs of `fn(link, row)` per example (G = len(seeds[p])), served by `sampler` under `params` through an
    endpoint open for this call only (`endpoint`: its context, strict and said), as one Rollout (`env_rewards`:
    what each run returned; `env_info`: its metrics, turns, rows and tool-call errors)."""
    g = len(seeds[0]) if seeds else 0
    served = Endpoint(sampler, tokenizer, params, **endpoint)
    try:
        runs = run_rollouts(served, fn, [(agent_row(ex), seed) for ex, group in zip(examples, seeds)
                                         for seed in group], max(1, g), timeout_s, name)
    finally:
        served.close()
    failed = sum(run.error is not None for run in runs)
    if served.failures and 2 * failed > len(runs):  # (the agents failed because the policy could not answer)
        raise UserError(f"{failed} of {len(runs)} runs of the {name} failed while the policy's endpoint failed under "
                        f"them ({len(served.failures)} requests answered with an error; the first: "
                        f"{served.failures[0]})")
    return harness_rollout(examples, g, runs, tokenizer)


def harness_rollout(examples: list[Example], group_size: int, runs: list[HarnessRollout], tokenizer: Any) -> Rollout:
    """The Rollout record of `runs` (trajectory p·G + j at index p·G + j; see the module docstring)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rows: list[tuple[int, Segment | None]] = [(t, s) for t, run in enumerate(runs)
                                              for s in ([*run.rows] if run.rows else [None])]
    # prompts: each row's own (an empty row borrows its neighbour's, so that rows' prompts stay in order)
    heads: list[list[int] | None] = [None if s is None else s.prompt_ids for _, s in rows]
    for order in (range(len(heads)), range(len(heads) - 1, -1, -1)):
        near = None
        for i in order:
            heads[i] = near = heads[i] if heads[i] is not None else near
    prompts: list[list[int]] = []
    row_prompt: list[int] = []
    for head in heads:
        tokens = head if head is not None else [pad]
        if not prompts or prompts[-1] != tokens:
            prompts.append(tokens)
        row_prompt.append(len(prompts) - 1)
    prompt_ids, prompt_mask = left_pad(prompts, pad)
    width = max([len(s.ids) for _, s in rows if s is not None], default=0)
    n = len(rows)
    ids = torch.full((n, width), pad, dtype=torch.long)
    mask, model = torch.zeros((n, width), dtype=torch.bool), torch.zeros((n, width), dtype=torch.bool)
    logprobs, floors = torch.zeros((n, width)), torch.full((n, width), -math.inf)
    turns = torch.full((n, width), -1, dtype=torch.long)
    for i, (_, s) in enumerate(rows):
        if s is None or not s.ids:
            continue
        k = len(s.ids)
        ids[i, :k], mask[i, :k] = torch.tensor(s.ids), True
        model[i, :k], logprobs[i, :k] = torch.tensor(s.model_mask), torch.tensor(s.logprobs)
        floors[i, :k], turns[i, :k] = torch.tensor(s.floors), torch.tensor(s.turn_of, dtype=torch.long)
    cut = bool((floors > -math.inf).any())
    rollout = Rollout(
        examples=examples, group_size=group_size, prompt_ids=prompt_ids, prompt_mask=prompt_mask,
        completion_ids=ids, completion_mask=mask, sampling_logprobs=logprobs,
        truncated=torch.tensor([s is not None and s.truncated for _, s in rows], dtype=torch.bool),
        completions=[], model_mask=model,
        env_rewards=[run.reward for run in runs], env_info=[_info(run) for run in runs],
        transcripts=[_transcript(run, tokenizer) for run in runs],
        support_floors=floors if cut else None,
        row_trajectory=torch.tensor([t for t, _ in rows], dtype=torch.long),
        row_prompt=torch.tensor(row_prompt, dtype=torch.long),
        turn_rewards=[dict(run.turn_rewards) for run in runs], row_turns=turns,
    )
    # what reward functions and evaluations read of a trajectory: the model's last message
    texts = tokenizer.batch_decode(completion_token_ids(rollout), skip_special_tokens=True)
    return dataclasses.replace(rollout, completions=list(texts))


def _transcript(run: HarnessRollout, tokenizer: Any) -> list[dict[str, str]]:
    """What the agent sent first (its first row's prompt, as the model read it), then each row after its prompt, as
    samples.jsonl shows a conversation (the error, when the run failed)."""
    sent = [{"role": "prompt", "content": tokenizer.decode(run.rows[0].prompt_ids)}] if run.rows else []
    shown = sent + [{"role": "row", "content": tokenizer.decode(s.ids)} for s in run.rows]
    return shown + ([{"role": "error", "content": run.error}] if run.error else [])


def _info(run: HarnessRollout) -> dict[str, float]:
    """What env/... logs of a run: its turns, rows, unreadable tool calls, requests served at the run's values
    rather than theirs, completions on calls it marked as not trained, failure, the rewards it reported for its
    turns (summed), and its own metrics."""
    return {"turns": float(run.turns), "rows": float(len(run.rows)), "tool_parse_errors": float(run.tool_parse_errors),
            "overridden": float(run.overridden), "untrained_turns": float(run.untrained),
            "errors": float(run.error is not None), "turn_rewards": float(sum(run.turn_rewards.values())),
            **run.metrics}
