r"""reasoning-gym's own scorers as rewards: the rows of a `reasoning_gym:<task>` source (rlvr.data.tasks.gym).

The completion's answer is its last ``\boxed{}`` (else its last ``<answer>``), and the task's scorer
(`reasoning_gym.get_score_answer_fn`) compares it with the row's `answer` and `metadata`, partial credit and
all: `reasoning_gym` is that score, `reasoning_gym_solved` 1.0 only for a full score (the held-out verdict).
A scorer that raises on a strange answer scores it 0.0, with the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.extraction import extract_answer
from rlvr.rewards.scores import Scores, short
from rlvr.rewards.text import completion_text


def reasoning_gym(completions: list[Any], answer: list[Any], metadata: list[Any],
                  question: list[Any] | None = None, **kwargs: Any) -> Scores:
    """The task's own score of each completion's final answer, in [0, 1]; None for a row that names no
    reasoning-gym task (its `metadata` has no `source_dataset`)."""
    questions = question if question is not None else [None] * len(completions)
    scores: list[float | None] = []
    reasons: list[str] = []
    for completion, gold, meta, asked in zip(completions, answer, metadata, questions, strict=True):
        task = meta.get("source_dataset") if isinstance(meta, dict) else None
        if task is None:
            scores.append(None)
            reasons.append("the row's metadata names no reasoning-gym task (source_dataset)")
            continue
        given = extract_answer(completion_text(completion), "strict")
        shown = "no \\boxed{} answer" if given is None else short(given)
        try:
            score = float(_scorer(task)(given, {"question": asked, "answer": gold, "metadata": meta}))
        except Exception as e:  # the scorer's own failure on a strange answer: that answer scores nothing
            scores.append(0.0)
            reasons.append(f"{task}'s scorer failed on {shown}: {type(e).__name__}")
            continue
        scores.append(score)
        reasons.append(f"{task} scores {shown} {score:g} (expected {short(str(gold))})")
    return Scores(scores, reasons)


def reasoning_gym_solved(completions: list[Any], answer: list[Any], metadata: list[Any],
                         question: list[Any] | None = None, **kwargs: Any) -> Scores:
    """1.0 where the task's scorer gives the answer full marks, else 0.0 (None kept): accuracy and pass@k."""
    scores = reasoning_gym(completions, answer, metadata, question)
    return Scores([None if s is None else float(s >= 1.0) for s in scores], scores.reasons)


@functools.cache
def _scorer(task: str) -> Callable[[str | None, dict[str, Any]], float]:
    try:
        import reasoning_gym
    except ImportError:
        raise UserError("the reasoning_gym reward needs the reasoning-gym package: pip install reasoning-gym") from None
    try:
        return reasoning_gym.get_score_answer_fn(task)  # type: ignore[no-any-return]
    except ValueError:
        raise UserError(f"reasoning-gym has no task {task!r} (the rows' metadata.source_dataset): give rows "
                        "that reasoning-gym generated") from None
