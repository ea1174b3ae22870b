"""OpenAI-RFT-style python graders: the user's ``grade(sample, item) -> float``, run in the sandbox.

``source`` defines ``grade(sample: dict, item: dict) -> float``. For each completion it runs in a
fresh `rlvr.sandbox` process, never in the trainer's: ``sample = {"output_text": completion}``
and ``item`` (the dataset row) arrive as JSON on stdin, and the score goes back as JSON. The
trainer's process only parses that JSON: an int or float (not a bool, not NaN) is the reward.
A grader that raises, times out, prints no score or returns a non-number scores 0.0 (the reason
is logged once per distinct reason); a sandbox that cannot start gives None.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.rewards.text import completion_text
from rlvr.sandbox import Limits, run_python

# Runs in the sandbox. The grader's own prints go to stderr; only the score uses stdout.
_HARNESS = """
import json, os, sys
channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
payload = json.loads(sys.stdin.read())
namespace = {"__name__": "grader"}
with open("grader.py", encoding="utf-8") as f:
    exec(compile(f.read(), "grader.py", "exec"), namespace)
score = namespace["grade"](payload["sample"], payload["item"])
if type(score) in (int, float):
    channel.write(json.dumps({"score": score}))
else:
    channel.write(json.dumps({"invalid": repr(score)[:200]}))
"""
# Arguments TRL passes that are not dataset columns.
_NOT_COLUMNS = ("prompts", "completions", "completion_ids", "trainer_state")
_logger = logging.getLogger(__name__)


def grade_in_sandbox(source: str, completion: str, item: dict[str, Any],
                     limits: Limits = Limits()) -> tuple[float | None, str]:
    """(score, reason) for one completion: 0.0 when the grader fails, None when the sandbox does."""
    payload = json.dumps({"sample": {"output_text": completion}, "item": item}, default=str)
    result = run_python(_HARNESS, stdin=payload, limits=limits, files={"grader.py": source})
    if result.status == "infra_error":
        return None, f"sandbox failure: {result.stderr.strip()[-300:]}"
    if result.status != "ok":
        last = (result.stderr.strip().splitlines() or [""])[-1]
        return 0.0, f"grader {result.status}: {last[:300]}"
    try:
        reply = json.loads(result.stdout)
    except ValueError:
        return 0.0, "the grader printed no score"
    score = reply.get("score") if isinstance(reply, dict) else None
    if type(score) not in (int, float) or not math.isfinite(score):
        invalid = reply.get("invalid", score) if isinstance(reply, dict) else reply
        return 0.0, f"not a finite number: grade() returned {invalid}"
    return float(score), f"grade() returned {score:g}"


def python_grader(source: str, *, limits: Limits = Limits()) -> Callable[..., list[float | None]]:
    """A TRL-style reward function that scores each completion with `source`'s ``grade``.

    ``fn(prompts=..., completions=..., completion_ids=..., **columns) -> list[float | None]``;
    each row's ``item`` is built from the dataset columns. Completions run in parallel, each in
    its own sandboxed process.
    """
    logged: set[str] = set()

    def python_grade(completions: Sequence[Any], **columns: Any) -> list[float | None]:
        texts = [completion_text(c) for c in completions]
        items = _items(len(texts), columns)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            graded = list(pool.map(lambda pair: grade_in_sandbox(source, *pair, limits),
                                   zip(texts, items)))
        for score, reason in graded:
            if (score is None or not reason.startswith("grade() returned ")) and reason not in logged:
                logged.add(reason)
                _logger.warning("python grader: %s", reason)
        return [score for score, _ in graded]

    return python_grade


def _items(n: int, columns: dict[str, Any]) -> list[dict[str, Any]]:
    """The dataset row of each completion, from TRL's column lists."""
    rows = {k: v for k, v in columns.items()
            if k not in _NOT_COLUMNS and isinstance(v, (list, tuple)) and len(v) == n}
    return [{k: v[i] for k, v in rows.items()} for i in range(n)]
