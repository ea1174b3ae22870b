"""Turn an Example's prompt into the exact text the model is asked to continue.

    "chat"     the tokenizer's own chat template, ending with the assistant turn's header
    "plain"    the prompt text as it is (chat messages: their contents, one paragraph each)
    "r1_zero"  the DeepSeek-R1-Zero template (DeepSeek-R1 paper, Sec. 2.2.3, Table 1)
    any string containing "{prompt}" is a custom template; "{prompt}" is replaced by the prompt

A base model has no chat template, so "r1_zero" or "plain" is the choice there; an instruct
model usually wants "chat".
"""

from __future__ import annotations

from typing import Any, cast

from rlvr.errors import UserError
from rlvr.records import Messages

TEMPLATES = ("chat", "plain", "r1_zero")

# DeepSeek-R1 Table 1, word for word, so results compare with R1-Zero replications.
R1_ZERO = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant "
    "solves it. The assistant first thinks about the reasoning process in the mind and then "
    "provides the user with the answer. The reasoning process and answer are enclosed within "
    "<think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning "
    "process here </think> <answer> answer here </answer>. User: {prompt}. Assistant:"
)


def with_few_shot(prompt: str | Messages, shots: list[tuple[str, str]]) -> str | Messages:
    r"""The prompt as chat messages preceded by the example exchanges (unchanged when there are none).

    >>> with_few_shot("What is 1 + 2?", [("What is 10 + 10?", "\\boxed{20}")])[1]
    {'role': 'assistant', 'content': '\\boxed{20}'}
    """
    if not shots:
        return prompt
    turns = [m for q, a in shots for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})]
    return turns + ([{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt))


def expected_format(template: str) -> str:
    """The format reward (rlvr.rewards) checking the layout a template asks for: R1-Zero's
    <think>…</think><answer>…</answer>, or the \\boxed{} answer every other prompt asks for.

    >>> expected_format("r1_zero"), expected_format("chat")
    ('think_answer_format', 'boxed_format')
    """
    return "think_answer_format" if template == "r1_zero" else "boxed_format"


def render_prompt(
    prompt: str | Messages, *, template: str, tokenizer: Any = None, system_prompt: str | None = None
) -> str:
    """The model's input text for one prompt.

    With "chat" the system prompt becomes a system message; with the other templates it comes
    first, followed by a blank line.

    >>> render_prompt("What is 2 + 3?", template="plain")
    'What is 2 + 3?'
    >>> render_prompt("What is 2 + 3?", template="Q: {prompt}\\nA:")
    'Q: What is 2 + 3?\\nA:'
    >>> render_prompt("What is 2 + 3?", template="r1_zero").endswith("User: What is 2 + 3? Assistant:")
    True
    """
    if template == "chat":
        return _render_chat(_messages(prompt, system_prompt), tokenizer)
    if template == "plain":
        text = _text(prompt)
    elif template == "r1_zero":
        text = R1_ZERO.replace("{prompt}.", _sentence(_text(prompt)))
    elif "{prompt}" in template:
        # str.replace, not str.format: templates often hold literal braces such as \boxed{}.
        text = template.replace("{prompt}", _text(prompt))
    else:
        raise UserError(
            f"unknown template {template!r}; use one of {', '.join(TEMPLATES)}, "
            "or a custom string containing {prompt}"
        )
    return text if system_prompt is None else f"{system_prompt}\n\n{text}"


def _messages(prompt: str | Messages, system_prompt: str | None) -> Messages:
    """Chat messages for a prompt, with the system prompt as the first message when given."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if system_prompt is None:
        return messages
    if messages and messages[0].get("role") == "system":
        raise UserError(
            "the prompt already starts with a system message and system_prompt is also set; "
            "remove one of the two"
        )
    return [{"role": "system", "content": system_prompt}, *messages]


def _render_chat(messages: Messages, tokenizer: Any) -> str:
    if tokenizer is None:
        raise UserError('template "chat" needs the tokenizer; pass tokenizer=..., or use template "plain"')
    if not getattr(tokenizer, "chat_template", None):
        raise UserError(
            'template "chat" needs a tokenizer with a chat template and this one has none '
            '(a base model?); use template "plain" or "r1_zero"'
        )
    return cast(str, tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


def _text(prompt: str | Messages) -> str:
    """Plain text of a prompt: chat messages become their contents, a blank line apart.

    >>> _text([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    'a\\n\\nb'
    """
    return prompt if isinstance(prompt, str) else "\n\n".join(m["content"] for m in prompt)


def _sentence(text: str) -> str:
    """The prompt as R1-Zero's "User: {prompt}." expects it, without doubling the final stop.

    >>> _sentence("What is 2 + 3?"), _sentence("Add 2 and 3"), _sentence("Add 2 and 3.")
    ('What is 2 + 3?', 'Add 2 and 3.', 'Add 2 and 3.')
    """
    text = text.rstrip()
    return text if text.endswith((".", "?", "!")) else text + "."
