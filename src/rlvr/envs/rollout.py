"""Multi-turn rollouts: each trajectory is a conversation between the policy and its environment.

All trajectories decode together in one batch (rlvr.envs.kv_batch), each row keeping its KV cache for
the whole conversation (a group's shared prompt is prefilled once). When a row's message ends (its
end-of-turn token, the message or transcript token budget, or, for an environment with `message_done`,
the moment a tool call is complete) the row leaves the batch and its message goes to its environment in
a thread (the sandbox runs while the model decodes); the others keep decoding. The row comes back
`rejoin_after` decoding steps later (waiting then for its environment if it is still busy), with the
environment's reply and the template's turn markers to prefill on top of its cache (in a forward of
their own, so that the rows decoding meanwhile run one token each), and writes its next message. A
fixed number of steps, not "when the tool is done", keeps the batch of every step, hence the run,
reproducible.

A trajectory ends when the environment says done, after `max_turns` messages, at `max_tokens`, or when a
message is cut at the message budget (`params.max_new_tokens`) before the model closed its turn: the
environment is not asked then (`info["cut_before_reply"]`: env/cut_before_reply), unless `reply_to_cut`
hands it the cut message anyway (environment.reply_to_cut).
After the prompt, a transcript is one token sequence: model tokens (sampled, with their log-probs; the
loss and the KL cover these only, `model_mask`) and context tokens (the chat template's turn markers and
the environment's messages). A message the environment cut (a tool call ends the turn at its closing
fence, `Reply.keep`) keeps only its tokens up to there; the template's end-of-turn marker is then context.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from rlvr.deadline import DaemonPool
from rlvr.envs.base import (
    Environment,
    Message,
    Reply,
    calling,
    checked_reply,
    replies,
    step_arguments,
    wait_for,
)
from rlvr.envs.kv_batch import KVBatch, Parked
from rlvr.envs.template import completion_text, first_prefix
from rlvr.prepacked import packed_linears
from rlvr.rollout import SamplingParams, sample_next
from rlvr.seeds import uniforms


@dataclass
class Trajectory:
    """One conversation: the prompt's tokens, then the transcript (model and context tokens)."""

    prompt_ids: list[int]
    messages: list[Message]  # the whole conversation, the starting messages included
    ids: list[int] = field(default_factory=list)  # the transcript after the prompt
    model_mask: list[bool] = field(default_factory=list)  # True where the policy wrote the token
    logprobs: list[float] = field(default_factory=list)  # sampling log-prob of model tokens, 0 elsewhere
    floors: list[float] = field(default_factory=list)  # support floor of model tokens (rlvr.rollout), −inf elsewhere
    done: bool = False
    truncated: bool = False  # ended by the token budget, the turn limit or a message cut mid-way
    reward: float | None = None  # the environment's, when it scores the trajectory
    info: dict[str, float] = field(default_factory=dict)  # summed Reply.info, and "turns"
    turn_rewards: dict[int, float] = field(default_factory=dict)  # model message k: a reward its reply gave it

    def add(self, ids: list[int], sampled: list[tuple[float, float]] | None) -> None:
        """Model tokens (with their (log-prob, support floor) each) or, with None, context tokens."""
        self.ids += ids
        self.model_mask += [sampled is not None] * len(ids)
        self.logprobs += [lp for lp, _ in sampled] if sampled is not None else [0.0] * len(ids)
        self.floors += [floor for _, floor in sampled] if sampled is not None else [float("-inf")] * len(ids)

    @property
    def final_message(self) -> str:
        """The model's last message: what the task's verifier scores."""
        return next((m["content"] for m in reversed(self.messages) if m["role"] == "assistant"), "")


_BASE = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]  # a conversation to diff against


@dataclass(frozen=True)
class TurnFormat:
    """How the tokenizer's chat template closes a model turn and frames the next message."""

    end_of_turn: str  # the token that ends a model message (and stops decoding): "<|im_end|>"
    after_end: str  # what the template writes after it: "\n"
    tokenizer: Any
    closed: str  # the template's text of _BASE, what reply_text diffs against

    @classmethod
    def of(cls, tokenizer: Any) -> TurnFormat:
        closed = tokenizer.apply_chat_template(_BASE, tokenize=False)
        end = tokenizer.eos_token
        return cls(end_of_turn=end, after_end=closed[closed.rindex(end) + len(end):] if end in closed else "",
                   tokenizer=tokenizer, closed=closed)

    def reply_text(self, message: Message) -> str:
        """The template's text for an environment message and the opening of the model's next turn."""
        return self.replies_text([message])

    def replies_text(self, messages: list[dict[str, Any]]) -> str:
        """The template's text for messages after a model turn (tool results, a user's), and the opening of the
        model's next turn."""
        extended = self.tokenizer.apply_chat_template([*_BASE, *messages], tokenize=False, add_generation_prompt=True)
        if not extended.startswith(self.closed):
            raise ValueError("the chat template rewrites earlier turns when a message is added: cannot append turns")
        return cast(str, extended[len(self.closed):])

    def encode(self, text: str) -> list[int]:
        return cast(list[int], self.tokenizer(text, add_special_tokens=False).input_ids)


def start(tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> Trajectory:
    """A trajectory at its prompt: the chat template of `messages` (listing `tools`, when the environment
    has the model call them in the template's own format)."""
    ids = tokenizer.apply_chat_template(messages, tools=tools, tokenize=True, add_generation_prompt=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    return Trajectory(prompt_ids=list(ids), messages=list(messages))


def converse(model: torch.nn.Module, tokenizer: Any, trajectories: list[Trajectory], envs: list[Environment],
             params: SamplingParams, *, max_turns: int, max_tokens: int, stop_ids: list[int],
             seeds: list[int] | None = None, rejoin_after: int = 1,
             timeout_s: float | None = None, reply_to_cut: bool = False) -> list[Trajectory]:
    """Run every trajectory to its end (see the module docstring); `params.max_new_tokens` bounds one
    message, `max_tokens` a whole transcript (model and context tokens); `timeout_s` each call of an
    environment's method (a call past it ends the rollout with one line: rlvr.deadline). Trajectory i draws
    its n-th token with the n-th number of `seeds[i]`'s stream (rlvr.seeds; None: torch's generator)."""
    fmt, batch = TurnFormat.of(tokenizer), KVBatch(model, tokenizer.pad_token_id)
    drawn = [0] * len(trajectories)  # tokens each trajectory has drawn so far
    writing: dict[int, tuple[list[int], list[tuple[float, float]]]] = {  # the message each decoding row is writing
        row: ([], []) for row in range(len(trajectories))}
    joining: list[tuple[int, Parked | None, list[int]]] = [(row, None, t.prompt_ids)
                                                           for row, t in enumerate(trajectories)]
    waiting: dict[int, _Waiting] = {}
    step = 0
    # the linear weights packed for a CPU's decoding steps (rlvr.prepacked); the environments' calls on daemon threads
    # (a step() that never returns holds up nothing)
    with packed_linears(model, params.max_new_tokens), closing(DaemonPool(max(1, min(16, len(trajectories))))) as pool:
        while batch.rows or waiting or joining:
            if not batch.rows and not joining:  # nobody decodes: skip ahead to the next row due back
                step = max(step, min(w.due for w in waiting.values()))
            for row in sorted(r for r, w in waiting.items() if w.due <= step):
                w = waiting.pop(row)
                returning = _come_back(trajectories[row], w, fmt, max_turns, max_tokens, timeout_s, reply_to_cut)
                if returning is not None:
                    joining.append((row, w.parked, returning))
            logits = [batch.forward()] if batch.rows else []
            if joining:
                logits.append(batch.admit(joining))
                joining = []
            if not logits:
                continue
            step += 1
            rows = list(batch.rows)
            u = (uniforms([seeds[r] for r in rows], [drawn[r] for r in rows])
                 if seeds is not None and params.temperature else None)
            tokens, logprobs, floors = choose_tokens(torch.cat(logits), params, u, rows,
                                                     [len(writing[r][0]) for r in rows])
            over = []
            for row, token, logprob, floor in zip(rows, tokens.tolist(), logprobs.tolist(), floors.tolist()):
                drawn[row] += 1
                ids, lps = writing[row]
                ids.append(token)
                lps.append((logprob, floor))
                room = min(params.max_new_tokens, max_tokens - len(trajectories[row].ids))
                if token in stop_ids or len(ids) >= room or tool_call_complete(envs[row], tokenizer, ids, timeout_s):
                    over.append(row)
                else:
                    batch.feed(row, token)
            for row, parked in (batch.park(over) if over else {}).items():
                ids, lps = writing[row]
                text = completion_text(tokenizer, ids)
                reply = pool.submit(calling, envs[row], "step", *step_arguments(envs[row], tokenizer, text))
                waiting[row] = _Waiting(envs[row], reply, time.monotonic(), step + rejoin_after, parked, ids, lps,
                                        ids[-1] in stop_ids, text)
                writing[row] = ([], [])
    return trajectories


def choose_tokens(logits: torch.Tensor, params: SamplingParams, u: torch.Tensor | None,
                  rows: list[int], written: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each decoding row's next token, its log-prob and support floor: sampled with uniforms `u`
    (rlvr.rollout.sample_next). `rows` (the trajectories) and `written` (tokens of the message so far) are
    there to script a conversation in tests."""
    return sample_next(logits, params, u)


def tool_call_complete(env: Environment, tokenizer: Any, ids: list[int], timeout_s: float | None) -> bool:
    """Whether the environment takes the message as it stands (`message_done`: a complete tool call)."""
    if getattr(env, "message_done", None) is None:
        return False
    return bool(calling(env, "message_done", completion_text(tokenizer, ids), seconds=timeout_s))


@dataclass
class _Waiting:
    """A row out of the batch while its environment answers its message."""

    env: Environment
    reply: Future[Reply]
    sent: float  # when the message went to the environment (time.monotonic)
    due: int  # the decoding step it comes back at
    parked: Parked
    ids: list[int]
    logprobs: list[tuple[float, float]]  # (log-prob, support floor) of each token of the message
    ended: bool  # the model closed the message itself (an end-of-turn token)
    text: str


def _come_back(t: Trajectory, w: _Waiting, fmt: TurnFormat, max_turns: int, max_tokens: int,
               timeout_s: float | None, reply_to_cut: bool) -> list[int] | None:
    """Record the message and the reply; the tokens the row runs next, or None when the trajectory is over."""
    reply = checked_reply(w.env, wait_for(w.env, "step", w.reply, timeout_s, w.sent))
    kept, context = record_turn(t, w.ids, w.logprobs, w.ended, w.text, reply, fmt, max_turns, max_tokens,
                                reply_to_cut)
    if t.done:
        return None
    w.parked.forget_last(len(w.ids) - 1 - kept)  # the cache holds every sampled token but the last
    return (w.ids[-1:] if kept == len(w.ids) else []) + context


def record_turn(t: Trajectory, ids: list[int], logprobs: list[tuple[float, float]], ended: bool, text: str,
                reply: Reply, fmt: TurnFormat, max_turns: int, max_tokens: int,
                reply_to_cut: bool = False) -> tuple[int, list[int]]:
    """Append one model message and the environment's reply to `t`: (model tokens kept, context tokens);
    the trajectory ends (truncated) at `max_turns` messages or `max_tokens` tokens, and at a message cut
    before its end unless `reply_to_cut` (see the module docstring)."""
    kept, context = _record(t, ids, logprobs, ended, text, reply, fmt, max_tokens, reply_to_cut)
    if not t.done and t.info["turns"] >= max_turns:
        t.done = t.truncated = True
    return kept, context


def _record(t: Trajectory, ids: list[int], logprobs: list[tuple[float, float]], ended: bool, text: str,
            reply: Reply, fmt: TurnFormat, max_tokens: int, reply_to_cut: bool) -> tuple[int, list[int]]:
    t.info["turns"] = t.info.get("turns", 0.0) + 1
    for key, value in reply.info.items():
        t.info[key] = t.info.get(key, 0.0) + value
    if reply.keep is not None and reply.keep < len(text):  # a tool call: the message ends at its fence
        k = _tokens_covering(fmt.tokenizer, ids, reply.keep)
        ids, logprobs, ended = ids[:k], logprobs[:k], False
        text = completion_text(fmt.tokenizer, ids)
    t.add(ids, logprobs)
    t.messages.append({"role": "assistant", "content": text})
    cut = not ended and reply.keep is None  # the message hit its budget before the model closed it
    if reply.done or (cut and not reply_to_cut):  # the end, or a message cut before its end
        t.done, t.reward, t.truncated = True, reply.reward, not ended
        if cut and not reply.done:
            t.info["cut_before_reply"] = 1.0
        return len(ids), []
    if reply.reward is not None:  # (a reward before the end: this message's, kept with it)
        t.turn_rewards[int(t.info["turns"]) - 1] = float(reply.reward)
    closing = "" if ended else fmt.end_of_turn  # a cut message is closed by the context, not the model
    answer = replies(reply) or [{"role": "user", "content": ""}]
    context = fmt.encode(closing + fmt.after_end + fmt.replies_text(answer))
    t.add(context, None)
    t.messages.extend(answer)
    if len(t.ids) >= max_tokens:
        t.done = t.truncated = True
    return len(ids), context


def _tokens_covering(tokenizer: Any, ids: list[int], chars: int) -> int:
    """The fewest leading tokens of `ids` whose text holds the first `chars` characters."""
    return first_prefix(len(ids), lambda k: len(completion_text(tokenizer, ids[:k])) >= chars)


def transcript_tensors(trajectories: list[Trajectory], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded [N, L] completion ids, completion mask, model mask, sampling log-probs and support floors.

    >>> t = Trajectory(prompt_ids=[1], messages=[])
    >>> t.add([5, 6], [(-0.5, -1.0), (-0.25, float("-inf"))]); t.add([7], None)
    >>> out = transcript_tensors([t, Trajectory(prompt_ids=[1], messages=[])], pad_id=0)
    >>> out["completion_ids"].tolist(), out["model_mask"].int().tolist()
    ([[5, 6, 7], [0, 0, 0]], [[1, 1, 0], [0, 0, 0]])
    """
    width = max((len(t.ids) for t in trajectories), default=0)
    ids = torch.full((len(trajectories), width), pad_id, dtype=torch.long)
    real = torch.zeros((len(trajectories), width), dtype=torch.bool)
    model = torch.zeros_like(real)
    logprobs = torch.zeros((len(trajectories), width))
    floors = torch.full((len(trajectories), width), float("-inf"))
    for row, t in enumerate(trajectories):
        n = len(t.ids)
        ids[row, :n] = torch.tensor(t.ids, dtype=torch.long)
        real[row, :n] = True
        model[row, :n] = torch.tensor(t.model_mask, dtype=torch.bool)
        logprobs[row, :n] = torch.tensor(t.logprobs)
        floors[row, :n] = torch.tensor(t.floors)
    return {"completion_ids": ids, "completion_mask": real, "model_mask": model, "sampling_logprobs": logprobs,
            "support_floors": floors, "row_turns": message_numbers(model)}


def message_numbers(model_mask: torch.Tensor) -> torch.Tensor:
    """[N, L] bool -> [N, L] long: which model message (0, 1, …) each model token is in, −1 elsewhere (each run of
    model tokens is one message: context follows every message but the last).

    >>> message_numbers(torch.tensor([[True, True, False, True, False]])).tolist()
    [[0, 0, -1, 1, -1]]
    """
    starts = model_mask & ~torch.nn.functional.pad(model_mask, (1, 0))[:, :-1]
    return torch.where(model_mask, starts.long().cumsum(-1) - 1, -1)

