"""What `rlvr sample` writes: the SFT dataset (one row per kept completion) and its summary.

    {"prompt": ..., "completion": ..., "id": ..., "reward": 1.0, "source_model": ...}   one line per row

`prompt` is the problem as the data asks it, text or chat messages, before any template: the
question with the instruction `rlvr eval` adds to a maths file ("... put your final answer within
\\boxed{}"), without a built-in task's few-shot exchange. `rlvr sft` renders it with its own template.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from rlvr.config import SampleConfig
from rlvr.evaluate.records import ProblemRecord, SampleRecord
from rlvr.evaluate.store import write_atomic
from rlvr.sample.filters import count_drops, is_verified


def sft_row(prompt: Any, problem_id: str, sample: SampleRecord, verdict: str, model: str) -> dict[str, Any]:
    """One SFT row: a kept completion, its prompt, and where it came from.

    >>> s = SampleRecord(text="4", tokens=2, truncated=False, correct={"strict": 1.0, "lenient": 1.0}, answer={})
    >>> sft_row("2+2?", "maths/0", s, "strict", "teacher")
    {'prompt': '2+2?', 'completion': '4', 'id': 'maths/0', 'reward': 1.0, 'source_model': 'teacher'}
    """
    return {"prompt": prompt, "completion": sample.text, "id": problem_id, "reward": sample.correct[verdict],
            "source_model": model}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` as JSON lines, written whole or not at all (temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def summarise(records: list[ProblemRecord], kept: dict[str, int], dropped: Counter[str], config: SampleConfig,
              sampling: dict[str, Any], output: Path) -> dict[str, Any]:
    """sample_summary.json: counts, drops per filter, pass rate, and the settings behind them.

    `kept` maps problem id -> completions kept; `sampling` is the store's settings (the sampling fingerprint).
    """
    samples = [s for r in records for s in r.samples]
    verified = sum(is_verified(s, config.verdict) for s in samples)
    return {
        "problems": len(records),
        "samples": len(samples),
        "kept": sum(kept.values()),
        "dropped": count_drops(dropped),
        "pass_rate": verified / len(samples) if samples else 0.0,  # verified / sampled, truncated included
        "verified": verified,
        "problems_with_kept": sum(1 for n in kept.values() if n > 0),
        "output": str(output),
        "settings": {
            "sampling": sampling,
            "filters": {"verdict": config.verdict, "format": config.format, "min_tokens": config.min_tokens,
                        "max_tokens": config.max_tokens, "max_per_prompt": config.max_per_prompt,
                        "dedupe": config.dedupe},
        },
    }
