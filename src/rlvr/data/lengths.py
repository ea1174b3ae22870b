"""Prompts that do not fit: longer than the model's context less the completion budget (or a set limit).

A prompt past the context cannot be sampled from, and one of megabytes would take minutes and many
gigabytes before failing, so prompts are measured once, when a run is built: training skips the
ones that do not fit (with a count), evaluation refuses them (a benchmark would silently shrink).
"""

from __future__ import annotations

from typing import Any

import torch

from rlvr.errors import UserError

# Special tokens a tokenizer may add around a text (BOS, EOS) when `add_special_tokens` is on.
_SPECIAL_TOKENS = 2
# Characters a token rarely exceeds: a prefix this many times the limit that is already over needs no more.
_MAX_CHARS_PER_TOKEN = 16


def prompt_limit(model: torch.nn.Module, max_new_tokens: int, configured: int | None = None) -> int | None:
    """Tokens a prompt may have: `configured`, else the model's context length less `max_new_tokens`
    (None when the model states no context length)."""
    if configured is not None:
        return configured
    context = context_length(model)
    return None if context is None else max(1, context - max_new_tokens)


def context_length(model: torch.nn.Module) -> int | None:
    """The tokens the model's context holds, as its config states (None when it does not)."""
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return None if context is None else int(context)


def budget_words(model: torch.nn.Module, max_new_tokens: int, default: str | None = None) -> str:
    """Where `prompt_limit(model, max_new_tokens)` comes from, in words, for `refuse_too_long`'s `why`;
    `default`: what chose the budget, when no setting did.

    >>> from types import SimpleNamespace
    >>> budget_words(SimpleNamespace(config=SimpleNamespace(max_position_embeddings=1024)), 1024, "gsm8k's default")
    "the model's context of 1024 tokens less the completion budget of 1024 new tokens, gsm8k's default"
    """
    chosen = f", {default}" if default else ""
    return (f"the model's context of {context_length(model)} tokens less the completion budget of {max_new_tokens} "
            f"new tokens{chosen}")


def too_long(texts: list[str], tokenizer: Any, limit: int | None, add_special_tokens: bool) -> dict[int, int]:
    """{index: tokens} of the texts with more than `limit` tokens (for a huge text, the tokens of its
    first `_MAX_CHARS_PER_TOKEN`·(limit + 1) characters: already over).

    A token holds at least one byte, so a text of at most `limit` bytes (less room for special tokens)
    fits without being tokenized: only the rare long ones are, and a megabyte prompt only in part.
    """
    if limit is None:
        return {}
    room = limit - (_SPECIAL_TOKENS if add_special_tokens else 0)
    over = {}
    for i, text in enumerate(texts):
        if len(text.encode("utf-8")) <= room:
            continue
        head = text[:_MAX_CHARS_PER_TOKEN * (limit + 1)]
        count = len(tokenizer(head, add_special_tokens=add_special_tokens)["input_ids"])
        if count <= limit and len(head) < len(text):  # a prefix that fits says nothing: measure it all
            count = len(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])
        if count > limit:
            over[i] = count
    return over


def refuse_too_long(texts: list[str], names: list[str], tokenizer: Any, limit: int | None, add_special_tokens: bool,
                    why: str = "the model's context less the completion budget",
                    fix: str = "give fewer new tokens") -> None:
    """A UserError naming the first prompt over `limit` tokens, if any (`names[i]` says which row), with `why`
    the limit is what it is (`budget_words`) and the setting that changes it (`fix`)."""
    over = too_long(texts, tokenizer, limit, add_special_tokens)
    if over:
        i = min(over)
        more = f" and {len(over) - 1} more" if len(over) > 1 else ""
        raise UserError(f"the prompt of {names[i]} has {over[i]}+ tokens, over the limit of {limit} ({why}){more}: "
                        f"shorten or drop those rows, or {fix}")
