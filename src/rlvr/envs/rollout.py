"""Multi-turn rollouts: each trajectory is a conversation between the policy and its environment.

    every turn:  the live trajectories' contexts (prompt + transcript so far) decode together in one
                 batch (rlvr.rollout.generate: a row that ends its message leaves the batch at once);
                 then each message goes to its environment, the tool calls of the turn concurrently
                 (threads: each waits on its own sandbox); the replies are appended as context
    until:       the environment says done, `max_turns` messages, or the trajectory's token budget.

After the prompt, a transcript is one token sequence: model tokens (sampled, with their log-probs; the
loss and the KL cover these only, `model_mask`) and context tokens (the chat template's turn markers and
the environment's messages). A message the environment cut (a tool call ends the turn at its closing
fence, `Reply.keep`) keeps only its tokens up to there; the template's end-of-turn marker is then context.
Turns are synchronous: a row whose tool is running waits for the turn's other calls. The KV cache is
not kept across turns: each turn prefills the whole transcript again (one forward over it per turn).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

from rlvr.envs.base import Environment, Message, Reply
from rlvr.rollout import SamplingParams, generate


@dataclass
class Trajectory:
    """One conversation: the prompt's tokens, then the transcript (model and context tokens)."""

    prompt_ids: list[int]
    messages: list[Message]  # the whole conversation, the starting messages included
    ids: list[int] = field(default_factory=list)  # the transcript after the prompt
    model_mask: list[bool] = field(default_factory=list)  # True where the policy wrote the token
    logprobs: list[float] = field(default_factory=list)  # sampling log-prob of model tokens, 0 elsewhere
    done: bool = False
    truncated: bool = False  # ended by the token budget, the turn limit or a message cut mid-way
    reward: float | None = None  # the environment's, when it scores the trajectory
    info: dict[str, float] = field(default_factory=dict)  # summed Reply.info, and "turns"

    def add(self, ids: list[int], logprobs: list[float] | None) -> None:
        """Model tokens (with their log-probs) or, with None, context tokens."""
        self.ids += ids
        self.model_mask += [logprobs is not None] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)

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

    @classmethod
    def of(cls, tokenizer: Any) -> TurnFormat:
        closed = tokenizer.apply_chat_template(_BASE, tokenize=False)
        end = tokenizer.eos_token
        return cls(end_of_turn=end, after_end=closed[closed.rindex(end) + len(end):] if end in closed else "",
                   tokenizer=tokenizer)

    def reply_text(self, message: Message) -> str:
        """The template's text for an environment message and the opening of the model's next turn."""
        closed = self.tokenizer.apply_chat_template(_BASE, tokenize=False)
        extended = self.tokenizer.apply_chat_template([*_BASE, message], tokenize=False, add_generation_prompt=True)
        if not extended.startswith(closed):
            raise ValueError("the chat template rewrites earlier turns when a message is added: cannot append turns")
        return extended[len(closed):]

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids


def start(tokenizer: Any, messages: list[Message]) -> Trajectory:
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    return Trajectory(prompt_ids=list(ids), messages=list(messages))


def converse(model: torch.nn.Module, tokenizer: Any, trajectories: list[Trajectory], envs: list[Environment],
             params: SamplingParams, *, max_turns: int, max_tokens: int, stop_ids: list[int],
             generator: torch.Generator | None = None) -> list[Trajectory]:
    """Run every trajectory to its end (see the module docstring); `params.max_new_tokens` bounds one
    message, `max_tokens` a whole transcript (model and context tokens)."""
    fmt = TurnFormat.of(tokenizer)
    for _ in range(max_turns):
        live = [i for i, t in enumerate(trajectories) if not t.done]
        if not live:
            break
        room = [max_tokens - len(trajectories[i].ids) for i in live]
        turn = SamplingParams(min(params.max_new_tokens, max(room)), params.temperature, params.top_p, params.top_k)
        out = generate(model, [trajectories[i].prompt_ids + trajectories[i].ids for i in live], 1, turn,
                       stop_ids=stop_ids, pad_id=tokenizer.pad_token_id, generator=generator)
        sampled = []
        for row, left in enumerate(room):
            mask = out.completion_mask[row]
            ids, logprobs = out.completion_ids[row][mask].tolist()[:left], out.logprobs[row][mask].tolist()[:left]
            sampled.append((ids, logprobs, bool(ids) and ids[-1] in stop_ids))
        texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids, _, _ in sampled]
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(live)))) as pool:
            replies = list(pool.map(lambda pair: pair[0].step(pair[1]), zip([envs[i] for i in live], texts)))
        for i, (ids, logprobs, ended), text, reply in zip(live, sampled, texts, replies):
            _record(trajectories[i], ids, logprobs, ended, text, reply, fmt, max_tokens)
    for t in trajectories:
        if not t.done:  # out of turns
            t.done = t.truncated = True
    return trajectories


def _record(t: Trajectory, ids: list[int], logprobs: list[float], ended: bool, text: str, reply: Reply,
            fmt: TurnFormat, max_tokens: int) -> None:
    """Append one model message and the environment's reply to `t`."""
    t.info["turns"] = t.info.get("turns", 0.0) + 1
    for key, value in reply.info.items():
        t.info[key] = t.info.get(key, 0.0) + value
    if reply.keep is not None and reply.keep < len(text):  # a tool call: the message ends at its fence
        k = _tokens_covering(fmt.tokenizer, ids, reply.keep)
        ids, logprobs, ended = ids[:k], logprobs[:k], False
        text = fmt.tokenizer.decode(ids, skip_special_tokens=True)
    t.add(ids, logprobs)
    t.messages.append({"role": "assistant", "content": text})
    if reply.done or (not ended and reply.keep is None):  # the end, or a message cut before its end
        t.done, t.reward, t.truncated = True, reply.reward, not ended
        return
    closing = "" if ended else fmt.end_of_turn  # a cut message is closed by the context, not the model
    t.add(fmt.encode(closing + fmt.after_end + fmt.reply_text(reply.message or {"role": "user", "content": ""})),
          None)
    t.messages.append(reply.message or {"role": "user", "content": ""})
    if len(t.ids) >= max_tokens:
        t.done = t.truncated = True


def _tokens_covering(tokenizer: Any, ids: list[int], chars: int) -> int:
    """The fewest leading tokens of `ids` whose text holds the first `chars` characters."""
    for k in range(1, len(ids) + 1):
        if len(tokenizer.decode(ids[:k], skip_special_tokens=True)) >= chars:
            return k
    return len(ids)


def transcript_tensors(trajectories: list[Trajectory], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded [N, L] completion ids, completion mask, model mask and sampling log-probs.

    >>> t = Trajectory(prompt_ids=[1], messages=[])
    >>> t.add([5, 6], [-0.5, -0.25]); t.add([7], None)
    >>> out = transcript_tensors([t, Trajectory(prompt_ids=[1], messages=[])], pad_id=0)
    >>> out["completion_ids"].tolist(), out["model_mask"].int().tolist()
    ([[5, 6, 7], [0, 0, 0]], [[1, 1, 0], [0, 0, 0]])
    """
    width = max((len(t.ids) for t in trajectories), default=0)
    ids = torch.full((len(trajectories), width), pad_id, dtype=torch.long)
    real = torch.zeros((len(trajectories), width), dtype=torch.bool)
    model = torch.zeros_like(real)
    logprobs = torch.zeros((len(trajectories), width))
    for row, t in enumerate(trajectories):
        n = len(t.ids)
        ids[row, :n] = torch.tensor(t.ids, dtype=torch.long)
        real[row, :n] = True
        model[row, :n] = torch.tensor(t.model_mask, dtype=torch.bool)
        logprobs[row, :n] = torch.tensor(t.logprobs)
    return {"completion_ids": ids, "completion_mask": real, "model_mask": model, "sampling_logprobs": logprobs}

