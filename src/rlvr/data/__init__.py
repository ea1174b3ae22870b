"""Prompts for training and evaluation: the first stage of the GRPO step.

    load_examples(source, ...) -> list[Example]     built-in task, .jsonl, .parquet, or hf:
    render_prompt(prompt, template=...) -> str      chat, plain, r1_zero, or a custom "{prompt}" string
    TASKS, get_task(name)                           built-in synthetic tasks with verifiable answers
"""

from rlvr.data.sources import load_examples
from rlvr.data.tasks import TASKS, Task, find_task, get_task
from rlvr.data.templates import TEMPLATES, expected_format, render_prompt, with_few_shot

__all__ = ["TASKS", "TEMPLATES", "Task", "expected_format", "find_task", "get_task", "load_examples", "render_prompt",
           "with_few_shot"]
