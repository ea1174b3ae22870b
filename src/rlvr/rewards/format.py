r"""Format rewards: does the completion lay out its answer the way the prompt asked?

They check shape only, never correctness, and are meant to be added with a small weight next to
an accuracy reward, e.g. DeepSeek-R1-Zero's ``<think>…</think> <answer>…</answer>`` template
(DeepSeek-AI 2025, §2.2.2).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from rlvr.config.choices import FORMAT_NAMES
from rlvr.rewards.extraction import boxed_contents
from rlvr.rewards.scores import Scores
from rlvr.rewards.text import completion_text

THINK_ANSWER_TAGS = ("<think>", "</think>", "<answer>", "</answer>")
_THINK_ANSWER = re.compile(r"\s*<think>.*?</think>\s*<answer>.*?</answer>\s*", re.DOTALL)


def boxed_format(completions: list[Any], **kwargs: Any) -> Scores:
    r"""1.0 where the completion has exactly one non-empty ``\boxed{...}``, else 0.0.

    >>> boxed_format([r"so \boxed{x+1}", r"\boxed{3} or \boxed{4}", r"\boxed{}", "42"])
    [1.0, 0.0, 0.0, 0.0]
    """
    scores = []
    for completion in completions:
        boxes = boxed_contents(completion_text(completion))
        scores.append(1.0 if len(boxes) == 1 and boxes[0] else 0.0)
    return _with_reasons("boxed", scores)


def think_answer_format(completions: list[Any], **kwargs: Any) -> Scores:
    """1.0 where the completion is ``<think>…</think>`` then ``<answer>…</answer>`` and nothing after.

    Whitespace is allowed around and between the two blocks; each tag must appear exactly once.

    >>> think_answer_format([
    ...     "<think>2+2</think>\\n<answer>4</answer>\\n",
    ...     "<think>2+2</think><answer>4</answer> done",
    ...     "<answer>4</answer>",
    ...     "<think>a</think><answer>4</answer><answer>5</answer>",
    ... ])
    [1.0, 0.0, 0.0, 0.0]
    """
    return _with_reasons("think_answer", [_think_answer_score(completion_text(c)) for c in completions])


def _think_answer_score(text: str) -> float:
    # The regex alone would let `.*?` swallow a second <answer> block; counting tags rules it out.
    each_tag_once = all(text.count(tag) == 1 for tag in THINK_ANSWER_TAGS)
    return 1.0 if each_tag_once and _THINK_ANSWER.fullmatch(text) else 0.0


def soft_think_answer_format(completions: list[Any], **kwargs: Any) -> Scores:
    """0.25 for each of ``<think>``, ``</think>``, ``<answer>``, ``</answer>`` found in that order.

    Tags are looked for one after another, each after the previous one found, so a tag out of
    order earns nothing; partial credit gives a gradient before the full format is ever sampled.

    >>> soft_think_answer_format([
    ...     "<think>a</think><answer>4</answer>",
    ...     "a</think><answer>4</answer>",
    ...     "<answer>4</answer><think>a</think>",
    ...     "4",
    ... ])
    [1.0, 0.75, 0.5, 0.0]
    """
    return _with_reasons("soft_think_answer", [_soft_score(completion_text(c)) for c in completions])


def _soft_score(text: str) -> float:
    score, position = 0.0, 0
    for tag in THINK_ANSWER_TAGS:
        found = text.find(tag, position)
        if found >= 0:
            score += 0.25
            position = found + len(tag)
    return score


def _with_reasons(name: str, scores: list[float]) -> Scores:
    return Scores(scores, [f"{name} format: {score:g}" for score in scores])


# The format checks by the name a grader spec (`type: format`) or `rlvr sample --format` uses.
FORMATS: dict[str, Callable[..., Scores]] = dict(
    zip(FORMAT_NAMES, (boxed_format, think_answer_format, soft_think_answer_format), strict=True))
