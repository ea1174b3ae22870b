"""One SFT row -> token ids and labels, with the loss on completion tokens only.

The row is first rendered as text in segments, each marked trained or not:

    prompt/completion, chat template   [system?, prompt..., assistant: completion], the completion trained
    messages, chat template            the conversation as given, every assistant turn trained
    prompt/completion, other template  render_prompt(prompt) (untrained), completion + EOS (trained)

Masking rule for chat: each assistant turn is trained from where the template's assistant
header ends (add_generation_prompt's text) to the turn's last non-whitespace character, i.e. its
content and its end-of-turn token (`<|im_end|>` in ChatML); headers, system, user and tool turns
and the whitespace after an end-of-turn token are not.

The whole text is then tokenized once (so a conversation is tokenized as the model reads it),
and a token is trained when it starts inside a trained segment; tokens the tokenizer adds itself
(a BOS) never are. `labels` holds the token id where trained and IGNORE elsewhere; as in
transformers, labels[t] is the target of the prediction made at position t − 1.
"""

from __future__ import annotations

from typing import Any, cast

from jinja2.exceptions import TemplateError

from rlvr.data.templates import render_prompt
from rlvr.errors import UserError, first_line, for_caller

IGNORE = -100  # label of a token that is not trained (transformers' ignore_index)

Messages = list[dict[str, str]]
Segment = tuple[str, bool]  # (text, trained)


def row_segments(row: dict[str, Any], *, tokenizer: Any, template: str, system_prompt: str | None,
                 where: str) -> list[Segment]:
    """The rendered text of a checked row (see rlvr.sft.data.check_row), in trained/untrained pieces."""
    if template == "chat":
        if not getattr(tokenizer, "chat_template", None):
            raise UserError('template "chat" needs a tokenizer with a chat template and this one has none '
                            f"(a base model?); use {_plain_fix()} (prompt/completion rows only)")
        if "messages" in row:
            messages, first_trained = with_system(list(row["messages"]), system_prompt, where), 0
        else:
            prompt = row["prompt"]  # assistant turns inside a prompt (few-shot examples) are context, not trained
            messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
            messages = with_system([*messages, {"role": "assistant", "content": row["completion"]}], system_prompt,
                                   where)
            first_trained = len(messages) - 1
        return chat_segments(messages, tokenizer, where, first_trained)
    if "messages" in row:
        raise UserError(f'{where}: a "messages" row needs template "chat" (template is {template!r}); '
                        'write it as {"prompt", "completion"} or use a tokenizer with a chat template')
    prompt_text = render_prompt(row["prompt"], template=template, system_prompt=system_prompt)
    return [(prompt_text, False), (row["completion"] + (tokenizer.eos_token or ""), True)]


def with_system(messages: Messages, system_prompt: str | None, where: str) -> Messages:
    """The messages with the system prompt first (when given); two system prompts are an error."""
    if system_prompt is None:
        return messages
    if messages and messages[0].get("role") == "system":
        raise UserError(f"{where}: the row starts with a system message and system_prompt is also set; "
                        "remove one of the two")
    return [{"role": "system", "content": system_prompt}, *messages]


def _plain_fix() -> str:  # (in the caller's words)
    return for_caller("--set template=plain", "template='plain'")


def chat_segments(messages: Messages, tokenizer: Any, where: str = "", first_trained: int = 0) -> list[Segment]:
    """The conversation as the chat template writes it, each assistant turn from messages[first_trained] on trained.

    >>> from rlvr.models import build_tiny_tokenizer
    >>> chat_segments([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
    ...               build_tiny_tokenizer())
    [('<|im_start|>user\\n2+2?<|im_end|>\\n<|im_start|>assistant\\n', False), ('4<|im_end|>', True), ('\\n', False)]
    """
    full = _render(tokenizer, messages, False, where)
    segments: list[Segment] = []
    done = 0
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or i < first_trained:
            continue
        header = _render(tokenizer, messages[:i], True, where)
        turn = _render(tokenizer, messages[: i + 1], False, where)
        if not (turn.startswith(header) and full.startswith(turn) and len(header) >= done):
            raise UserError(f"{where}: this tokenizer's chat template does not write a conversation as its turns "
                            "one after another, so assistant turns cannot be located; "
                            f"use {_plain_fix()} with prompt/completion rows")
        end = max(len(header), len(turn.rstrip()))  # keep the end-of-turn token, not the newline after it
        segments += [(full[done : len(header)], False), (full[len(header) : end], True)]
        done = end
    segments.append((full[done:], False))
    return [s for s in segments if s[0]]


def _render(tokenizer: Any, messages: Messages, add_generation_prompt: bool, where: str) -> str:
    try:
        return cast(str, tokenizer.apply_chat_template(messages, tokenize=False,
                                                       add_generation_prompt=add_generation_prompt))
    except (TemplateError, ValueError) as error:  # (transformers: ValueError for an empty conversation)
        raise UserError(f"{where}: the chat template rejects this conversation ({first_line(error)}); "
                        "fix the roles' order") from None


def encode_segments(segments: list[Segment], tokenizer: Any, add_special_tokens: bool) -> tuple[list[int], list[int]]:
    """(input_ids, labels) of the segments' text tokenized in one piece; see the module docstring.

    >>> from rlvr.models import build_tiny_tokenizer
    >>> tok = build_tiny_tokenizer()
    >>> ids, labels = encode_segments([("Q: 1+1\\nA: ", False), ("2<|im_end|>", True)], tok, add_special_tokens=False)
    >>> tok.decode(ids), [tok.decode([t]) for t in labels if t != IGNORE]
    ('Q: 1+1\\nA: 2<|im_end|>', ['2', '<|im_end|>'])
    """
    if not getattr(tokenizer, "is_fast", False):
        raise UserError("rlvr sft needs a fast (Rust) tokenizer to locate completion tokens; "
                        "this model ships only a slow one")
    text = "".join(piece for piece, _ in segments)
    trained_chars = [trained for piece, trained in segments for _ in piece]
    encoded = tokenizer(text, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    labels = [tok if end > start and trained_chars[start] else IGNORE
              for tok, (start, end) in zip(ids, encoded["offset_mapping"])]
    return ids, labels


def trained_count(labels: list[int]) -> int:
    """Tokens that carry loss: trained labels after the first position (nothing predicts the first).

    >>> trained_count([IGNORE, 5, 6, IGNORE]), trained_count([5, IGNORE])
    (2, 0)
    """
    return sum(label != IGNORE for label in labels[1:])
