"""Sampling with an environment (`environment.name` in `rlvr train` and `rlvr eval`): each of the G
samples of a prompt is a conversation.

The G trajectories of a group start from the same messages and the same environment seed (derived from
the group's first completion seed, rlvr.seeds): a group is G attempts at one task, as GRPO's baseline
needs. The Rollout they make holds each transcript after the prompt as its completion, `model_mask`
marking the policy's own tokens (the loss and the KL are theirs only), the final message as the text the
verifiers score, and the environment's reward, counts and conversation beside.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

from rlvr.envs.base import Environment, calling, checked_messages
from rlvr.envs.rollout import Trajectory, converse, start, transcript_tensors
from rlvr.errors import UserError
from rlvr.records import Example, Rollout
from rlvr.rollout import SamplingParams, left_pad
from rlvr.seeds import seed_of


def sample_conversations(model: torch.nn.Module, tokenizer: Any, examples: list[Example],
                         messages: list[list[dict[str, str]]], group_size: int, params: SamplingParams, *,
                         make_env: Callable[[], Environment], max_turns: int, max_tokens: int,
                         stop_ids: list[int], seeds: list[int], rejoin_after: int = 1,
                         timeout_s: float | None = None, reply_to_cut: bool = False, max_sessions: int = 0) -> Rollout:
    """G conversations for each example (its chat `messages` as the start), as one Rollout, decoded by rlvr's
    own engine (rlvr.envs.rollout.converse); conversation p·G + j draws its tokens from `seeds[p·G + j]`
    (rlvr.seeds); `timeout_s` bounds each call of an environment's method; `max_sessions`: see `conversations`."""
    def run(trajectories: list[Trajectory], envs: list[Environment], own: list[int]) -> None:
        converse(model, tokenizer, trajectories, envs, params, max_turns=max_turns, max_tokens=max_tokens,
                 stop_ids=stop_ids, seeds=own, rejoin_after=rejoin_after, timeout_s=timeout_s,
                 reply_to_cut=reply_to_cut)

    return conversations(run, tokenizer, examples, messages, group_size, params, make_env=make_env, seeds=seeds,
                         timeout_s=timeout_s, max_sessions=max_sessions)


Run = Callable[[list[Trajectory], list[Environment], list[int]], None]  # (trajectories, their envs, their seeds)


def conversations(run: Run, tokenizer: Any, examples: list[Example], messages: list[list[dict[str, str]]],
                  group_size: int, params: SamplingParams, *, make_env: Callable[[], Environment], seeds: list[int],
                  timeout_s: float | None = None, max_sessions: int = 0) -> Rollout:
    """The conversations' start (an environment each, reset to the row), `run` (an engine's turn loop) to
    take them to their end, and the Rollout they make. With `max_sessions` (environment.max_sessions; 0: all at
    once) the conversations run in waves of that many, each wave's environments closed before the next opens:
    each draws from its own seed, so a wave draws what it would draw in the whole batch."""
    trajectories, starts = [], []
    wave = max_sessions or len(seeds) or 1
    for begin in range(0, len(seeds), wave):
        made: list[Environment] = []
        try:
            for i in range(begin, min(begin + wave, len(seeds))):
                p = i // group_size
                seed = seed_of(seeds[p * group_size], 1) % (2**31 - 1)  # one task per group
                env = make_env()
                made.append(env)
                if callable(getattr(env, "bind", None)):  # an environment that adapts to the policy's tokenizer
                    calling(env, "bind", tokenizer, seconds=timeout_s)
                opening = checked_messages(env, calling(env, "reset", dict(examples[p].columns),
                                                        [dict(m) for m in messages[p]], seed, seconds=timeout_s))
                trajectories.append(start(tokenizer, opening, getattr(env, "tools", None)))
                starts.append(len(opening))
            run(trajectories[begin:], made, seeds[begin:begin + len(made)])
        except BaseException:
            close_all(made, timeout_s, failing=True)
            raise
        close_all(made, timeout_s)
    for trajectory in trajectories:  # (logged in every multi-turn run, 0 where no message was cut)
        trajectory.info.setdefault("cut_before_reply", 0.0)
    warn_if_mostly_cut(trajectories, params.max_new_tokens)
    heads = []
    for p in range(len(examples)):
        group = trajectories[p * group_size:(p + 1) * group_size]
        if any(t.prompt_ids != group[0].prompt_ids for t in group):
            raise UserError("the environment started the conversations of one prompt differently: reset() must "
                            "depend only on the row, the messages and the seed it is given")
        heads.append(group[0].prompt_ids)
    prompt_ids, prompt_mask = left_pad(heads, tokenizer.pad_token_id)
    t = transcript_tensors(trajectories, tokenizer.pad_token_id)
    return Rollout(
        examples=examples, group_size=group_size, prompt_ids=prompt_ids, prompt_mask=prompt_mask,
        completion_ids=t["completion_ids"], completion_mask=t["completion_mask"],
        sampling_logprobs=t["sampling_logprobs"],
        truncated=torch.tensor([x.truncated for x in trajectories], dtype=torch.bool),
        completions=[x.final_message for x in trajectories], model_mask=t["model_mask"],
        env_rewards=[x.reward for x in trajectories], env_info=[dict(x.info) for x in trajectories],
        transcripts=[x.messages[n:] for x, n in zip(trajectories, starts)],
        support_floors=t["support_floors"] if params.truncates else None,
        turn_rewards=[dict(x.turn_rewards) for x in trajectories], row_turns=t["row_turns"],
    )


def close_all(envs: list[Environment], timeout_s: float | None, failing: bool = False) -> None:
    """Each environment's optional `close()` (its trajectory over, however it ended: done, out of turns or
    tokens, or the step failing), so that what it holds (a server session, a process) is given back. While the
    step is failing anyway, a close that fails too is not what the run says."""
    for env in envs:
        if callable(getattr(env, "close", None)):
            try:
                calling(env, "close", seconds=min(timeout_s or 5.0, 5.0) if failing else timeout_s)
            except Exception:
                if not failing:
                    raise


_WARNED: list[bool] = []  # once per process: the warning below


def warn_if_mostly_cut(trajectories: list[Trajectory], max_new_tokens: int) -> None:
    """One line, once, when most conversations of a batch ended at a message cut before the environment
    could reply: a run that looks healthy while the environment never gets a second turn."""
    cut = sum(t.info.get("cut_before_reply", 0.0) for t in trajectories)
    if _WARNED or cut * 2 <= len(trajectories):
        return
    _WARNED.append(True)
    print(f"rlvr: {cut:.0f} of {len(trajectories)} conversations ended at a message cut at generation."
          f"max_new_tokens={max_new_tokens} before the environment could reply (env/cut_before_reply): raise it, "
          "or set environment.reply_to_cut: true (docs/environments.md)", file=sys.stderr)


def env_metrics(infos: list[dict[str, float]]) -> dict[str, float]:
    """Per-trajectory means of what the environments counted (each trajectory's `info`): env/turns,
    env/tool_calls, env/tool_errors, ...

    >>> env_metrics([{"turns": 1.0}, {"turns": 3.0, "tool_calls": 2.0}])
    {'env/tool_calls': 1.0, 'env/turns': 2.0}
    """
    if not infos:
        return {}
    keys = sorted({k for info in infos for k in info})
    return {f"env/{k}": sum(info.get(k, 0.0) for info in infos) / len(infos) for k in keys}
