"""Conversations with an environment on an engine that knows only token ids (its `complete`: vLLM, an engine in
a process of its own): turn by turn.

Each turn, every conversation still going writes its next message in one `complete` call of the engine (the
prompt and the transcript so far as its tokens; reusing what it computed of them is the engine's own business,
as vLLM's prefix cache does), with the seed of
(its completion seed, the turn) (rlvr.seeds). The messages go to their environments together, on daemon
threads (rlvr.deadline.DaemonPool), and the replies are recorded as rlvr's own engine records them
(rlvr.envs.rollout): the same Trajectory, token budgets, turn limit and transcript. An environment with
`message_done` (a tool call complete) has the message cut where it first says so: the tokens after it would
never have been written by an engine that asks after every token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from rlvr.config import EnvironmentConfig
from rlvr.deadline import DaemonPool
from rlvr.envs.base import Environment, calling, checked_reply, step_arguments, wait_for
from rlvr.envs.rollout import Trajectory, TurnFormat, record_turn, tool_call_complete
from rlvr.envs.sampling import conversations
from rlvr.envs.template import completion_text
from rlvr.records import Rollout
from rlvr.rollout import SamplingParams
from rlvr.samplers.protocol import Job, Sampled, SampleRequest
from rlvr.seeds import seed_of

Generate = Callable[[Sequence[Job], SamplingParams], list[Sampled]]  # an engine's `complete`


def sample_conversations(generate: Generate, tokenizer: Any, stop_ids: list[int], env: EnvironmentConfig,
                         make_env: Callable[[], Environment], requests: Sequence[SampleRequest],
                         params: SamplingParams) -> Rollout:
    """G conversations per request, as one Rollout (rlvr.envs.sampling), each message written by `generate`."""
    seeds = [s for r in requests for s in r.seeds]

    def run(trajectories: list[Trajectory], envs: list[Environment], own: list[int]) -> None:
        take_turns(generate, tokenizer, stop_ids, trajectories, envs, params, own, max_turns=env.max_turns,
                   max_tokens=env.max_tokens, timeout_s=env.timeout_s, reply_to_cut=env.reply_to_cut)

    return conversations(run, tokenizer, [r.prompt.example for r in requests],
                         [r.prompt.messages or [] for r in requests], len(requests[0].seeds), params,
                         make_env=make_env, seeds=seeds, timeout_s=env.timeout_s, max_sessions=env.max_sessions)


def take_turns(generate: Generate, tokenizer: Any, stop_ids: list[int], trajectories: list[Trajectory],
               envs: list[Environment], params: SamplingParams, seeds: list[int], *, max_turns: int,
               max_tokens: int, timeout_s: float | None, reply_to_cut: bool = False) -> None:
    """Run every trajectory to its end: the environment says done, `max_turns` messages, `max_tokens` tokens, a
    message cut before its end (unless `reply_to_cut`: rlvr.envs.rollout)."""
    fmt = TurnFormat.of(tokenizer)
    pool = DaemonPool(max(1, min(16, len(trajectories))))
    try:
        for turn in range(max_turns):
            live = [i for i, t in enumerate(trajectories) if not t.done]
            if not live:
                return
            jobs = [Job(trajectories[i].prompt_ids + trajectories[i].ids, seed_of(seeds[i], turn),
                        max(1, min(params.max_new_tokens, max_tokens - len(trajectories[i].ids)))) for i in live]
            sent = []
            for i, out in zip(live, generate(jobs, params)):
                ids, logprobs = _until_done(envs[i], tokenizer, out.token_ids, out.logprobs, timeout_s)
                text = completion_text(tokenizer, ids)
                ended = bool(ids) and ids[-1] in stop_ids
                sent.append((i, ids, logprobs, ended, text,
                             pool.submit(calling, envs[i], "step", *step_arguments(envs[i], tokenizer, text)),
                             time.monotonic()))
            for i, ids, logprobs, ended, text, reply, when in sent:
                t = trajectories[i]
                answer = checked_reply(envs[i], wait_for(envs[i], "step", reply, timeout_s, when))
                record_turn(t, ids, [(lp, float("-inf")) for lp in logprobs], ended, text, answer, fmt, max_turns,
                            max_tokens, reply_to_cut)
    finally:
        pool.close()


def _until_done(env: Environment, tokenizer: Any, ids: list[int], logprobs: list[float],
                timeout_s: float | None) -> tuple[list[int], list[float]]:
    """The message up to the first token after which the environment takes it (`message_done`), else whole."""
    for k in range(1, len(ids)):
        if tool_call_complete(env, tokenizer, ids[:k], timeout_s):  # (False at once without message_done)
            return ids[:k], logprobs[:k]
    return ids, logprobs
