"""Rows as TRL's reward functions expect them, so reward functions written for TRL and open-r1 run unchanged.

- With the chat template, a text prompt becomes one user message. Reward functions then receive prompts
  as conversations and completions as ``[{"role": "assistant", "content": text}]``, TRL's conversational
  form, which functions written for it index (``completion[0]["content"]``). The rendered text is the same.
- The gold answer is also given as ``solution``, the column TRL's and open-r1's accuracy rewards read,
  unless the row has its own.
"""

from __future__ import annotations

import dataclasses

from rlvr.records import Example

ANSWER_ALIASES = ("solution",)


def trl_form(examples: list[Example], *, chat: bool) -> list[Example]:
    """`examples` in TRL's form (see the module docstring).

    >>> row = trl_form([Example("What is 2 + 3?", {"answer": "5"})], chat=True)[0]
    >>> row.prompt, row.columns
    ([{'role': 'user', 'content': 'What is 2 + 3?'}], {'answer': '5', 'solution': '5'})
    >>> trl_form([Example("What is 2 + 3?", {"answer": "5", "solution": "2 + 3 = 5"})], chat=False)[0].columns
    {'answer': '5', 'solution': '2 + 3 = 5'}
    """
    return [_row(ex, chat) for ex in examples]


def _row(example: Example, chat: bool) -> Example:
    prompt = example.prompt
    if chat and isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    columns = example.columns
    if "answer" in columns:
        columns = {**columns, **{alias: columns["answer"] for alias in ANSWER_ALIASES if alias not in columns}}
    return dataclasses.replace(example, prompt=prompt, columns=columns)
