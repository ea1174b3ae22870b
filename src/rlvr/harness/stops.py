"""A draw cut at the first stop string an agent asked for (OpenAI's `stop`, Anthropic's `stop_sequences`)."""

from __future__ import annotations

from typing import Any

from rlvr.envs.template import completion_text, first_prefix
from rlvr.samplers.protocol import Sampled


def at_stop(tokenizer: Any, sampled: Sampled, stops: list[str]) -> tuple[Sampled, str, str | None]:
    """The draw cut at its first token whose text completes a stop string, the text before that string, and the
    string (the tokens after it were never decoded for the agent: each token depends only on those before it,
    so the cut draw is exactly what decoding that stopped there draws); the whole draw and text, and None,
    without a stop."""
    text = completion_text(tokenizer, sampled.token_ids)
    if not stops or not any(x in text for x in stops):
        return sampled, text, None

    def head(k: int) -> str:
        return completion_text(tokenizer, sampled.token_ids[:k])

    k = first_prefix(len(sampled.token_ids), lambda k: any(x in head(k) for x in stops))
    text = head(k)
    matched = min((x for x in stops if x in text), key=text.index)  # (the earliest; of two there, the first given)
    floors = None if sampled.floors is None else sampled.floors[:k]
    return Sampled(sampled.token_ids[:k], sampled.logprobs[:k], True, floors), text[:text.index(matched)], matched
