"""The pipeline's comparison of stages: pipeline_summary.json and report.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr.evaluate.report import interval, pct
from rlvr.evaluate.store import write_atomic


def stage_row(name: str, kind: str, output: str, summary: dict[str, Any] | None,
              evaluation: dict[str, Any] | None) -> dict[str, Any]:
    """One line of the comparison: the stage's own headline and, for model stages, its evaluation."""
    row: dict[str, Any] = {"stage": name, "kind": kind, "output": output, "result": stage_result(kind, summary)}
    if evaluation is not None:
        strict, n = evaluation["strict"], evaluation["settings"]["samples"]
        curves = strict["curves"] or {"oracle": [None], "majority": None}  # (none: a greedy-only evaluation)
        row["eval"] = {
            "greedy": strict["greedy"], "pass@1": strict["pass@1"], "samples": n,
            f"pass@{n}": curves["oracle"][-1],
            f"maj@{n}": curves["majority"][-1] if curves["majority"] else None,
        }
    return row


def stage_result(kind: str, summary: dict[str, Any] | None) -> str:
    """The stage's own number in words.

    >>> stage_result("sample", {"kept": 12, "samples": 64, "pass_rate": 0.25})
    'kept 12 of 64 samples (verified 25.0%)'
    """
    if not summary:
        return ""
    if kind == "sft":
        before, after = summary.get("before"), summary.get("after")
        if before and after:
            return f"held-out loss {before['loss']:.3f} → {after['loss']:.3f}"
        return f"{summary.get('steps', '?')} steps on {summary.get('train_examples', '?')} examples (no held-out rows)"
    if kind == "grpo":
        before, after = summary.get("before") or {}, summary.get("after") or {}
        if "strict" in before and "strict" in after:
            return f"held-out strict {interval(before['strict'])} → {interval(after['strict'])}"
        return f"{summary.get('steps', '?')} steps"
    if kind == "sample":
        return f"kept {summary['kept']} of {summary['samples']} samples (verified {pct(summary['pass_rate'])})"
    before, after = summary.get("before") or {}, summary.get("after") or {}
    if "pairwise_accuracy" in before and "pairwise_accuracy" in after:
        return (f"held-out pairwise accuracy {interval(before['pairwise_accuracy'])} → "
                f"{interval(after['pairwise_accuracy'])}")
    return ""


def write_report(root: Path, summary: dict[str, Any]) -> None:
    write_atomic(root / "pipeline_summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    lines = [f"# Pipeline {summary['recipe']}", "",
             "| stage | kind | greedy pass@1 | pass@1 (mean of n) | pass@n | maj@n | stage result |",
             "|---|---|---|---|---|---|---|"]
    for row in summary["stages"]:
        e = row.get("eval")
        cells = ([interval(e["greedy"]), interval(e["pass@1"]), pct(e[f"pass@{e['samples']}"]),
                  pct(e[f"maj@{e['samples']}"])]
                 if e else ["–"] * 4)
        lines.append(f"| {row['stage']} | {row['kind']} | " + " | ".join(cells) + f" | {row['result']} |")
    lines += ["", "Evaluation: strict extraction, 95% intervals; each stage's details are in its folder "
              "(eval/report.md for the models)."]
    write_atomic(root / "report.md", "\n".join(lines) + "\n")
