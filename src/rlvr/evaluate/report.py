"""summary.json, report.md (settings, results, curves as tables, a few completions) and curves.png."""

from __future__ import annotations

import io
import json
from typing import Any

from rlvr.config.choices import MODES
from rlvr.evaluate.records import ProblemRecord
from rlvr.evaluate.store import EvalStore

SHOWN_PROBLEMS = 3


def write_report(store: EvalStore, summary: dict[str, Any], records: list[ProblemRecord]) -> None:
    store.write("summary.json", json.dumps(summary, indent=2) + "\n")
    png = curves_png(summary)
    if png is not None:
        store.write("curves.png", png)
    store.write("report.md", markdown(summary, records, has_plot=png is not None))


def pct(value: float | None) -> str:
    """
    >>> pct(0.4567), pct(None)
    ('45.7%', '–')
    """
    return "–" if value is None else f"{100 * value:.1f}%"


def interval(block: dict[str, float] | None) -> str:
    """
    >>> interval({"mean": 0.5, "low": 0.25, "high": 0.75})
    '50.0% [25.0, 75.0]'
    """
    if block is None:
        return "–"
    return f"{pct(block['mean'])} [{100 * block['low']:.1f}, {100 * block['high']:.1f}]"


def headline(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(metric, strict, lenient) rows: the results table of the report and of the console."""
    s, n = summary["settings"], summary["settings"]["samples"]
    rows = [("greedy pass@1", interval(summary["strict"]["greedy"]), interval(summary["lenient"]["greedy"]))]
    if not n:  # greedy only
        return rows
    rows.append((f"pass@1 (mean of {n})", interval(summary["strict"]["pass@1"]),
                 interval(summary["lenient"]["pass@1"])))
    for k in [k for k in s["k"] if k > 1]:  # pass@1 is the row above
        rows.append((f"pass@{k}", pct(summary["strict"]["pass@k"][str(k)]), pct(summary["lenient"]["pass@k"][str(k)])))
    if s["voting"]:
        for k in s["k"]:
            rows.append((f"maj@{k}", pct(summary["strict"]["maj@k"][str(k)]), pct(summary["lenient"]["maj@k"][str(k)])))
    if summary["strict"]["curves"]["model"] is not None:
        rows.append((f"best-of-{n} by {_selector(s)}", pct(summary["strict"]["curves"]["model"][-1]),
                     pct(summary["lenient"]["curves"]["model"][-1])))
    rows.append((f"best-of-{n} by the verifier (oracle)", pct(summary["strict"]["curves"]["oracle"][-1]),
                 pct(summary["lenient"]["curves"]["oracle"][-1])))
    return rows


def _selector(settings: dict[str, Any]) -> str:
    return "reward model" if settings["reward_model"] else "process reward model"


def markdown(summary: dict[str, Any], records: list[ProblemRecord], has_plot: bool) -> str:
    s = summary["settings"]
    lines = [f"# {s['benchmark']}: {s['model']}", "",
             f"{summary['strict']['problems']} problems judged (of {summary['problems']}), "
             f"{s['samples'] or 'the greedy completion only, no'} samples each; 95% intervals in brackets.", "",
             "| metric | strict | lenient |", "|---|---|---|"]
    lines += [f"| {m} | {a} | {b} |" for m, a, b in headline(summary)]
    c = summary["completions"]
    t = c["tokens"]
    lines += ["", f"Completions: {c['count']}, mean {c['mean_tokens'] or 0:.1f} tokens (10th/50th/90th percentiles "
              f"{t['p10']:.0f}/{t['p50']:.0f}/{t['p90']:.0f}), {pct(c['truncated'])} cut at {s['max_new_tokens']} "
              f"tokens, {pct(c['reflection_rate'])} with a reflection phrase, {pct(c['format_share'])} in the expected "
              "format. Unjudged (sandbox failures, counted wrong): "
              f"{summary['strict']['unjudged_samples']}.", ""]
    if summary["strict"]["curves"] is not None:
        lines += ["## Test-time compute", ""]
        if has_plot:
            lines += ["![accuracy against N and against the token budget](curves.png)", ""]
        lines += _curve_tables(summary)
    lines += ["## Settings", "", "| setting | value |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in s.items()]
    lines += ["", "## Examples", ""]
    for record in records[:SHOWN_PROBLEMS]:
        sample, which = (record.samples[0], "first sample") if record.samples else (record.greedy, "greedy")
        if sample is None:
            continue
        lines += [f"**{record.id}** (gold: `{_cell(record.gold)}`), {which}, "
                  f"strict verdict {sample.correct['strict']}:",
                  "", "```text", sample.text.replace("```", "'''"), "```", ""]
    return "\n".join(lines)


def _curve_tables(summary: dict[str, Any]) -> list[str]:
    lines = []
    for mode in MODES:
        curves = summary[mode]["curves"]
        head = (["N", "oracle (pass@N)"] + (["majority"] if curves["majority"] else [])
                + (["model"] if curves["model"] else []))
        lines += [f"Accuracy against N ({mode}):", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for i, n in enumerate(curves["n"]):
            cells = [str(n), pct(curves["oracle"][i])]
            cells += [pct(curves["majority"][i])] if curves["majority"] else []
            cells += [pct(curves["model"][i])] if curves["model"] else []
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", f"pass@1 against the token budget ({mode}):", "", "| tokens | pass@1 |", "|---|---|"]
        lines += [f"| {b} | {pct(v)} |" for b, v in zip(curves["budgets"], curves["budget_pass@1"])]
        lines.append("")
    return lines


def _cell(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text.replace("|", "\\|").replace("\n", " ")


def curves_png(summary: dict[str, Any]) -> bytes | None:
    """Two panels, accuracy against N and against the token budget; None without matplotlib or samples."""
    if summary["strict"]["curves"] is None:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, (by_n, by_tokens) = plt.subplots(1, 2, figsize=(10, 4))
    for mode, style in zip(MODES, ("-", "--")):
        curves = summary[mode]["curves"]
        for name in ("oracle", "majority", "model"):
            if curves[name] is not None:
                by_n.plot(curves["n"], [100 * (v or 0) for v in curves[name]], style, marker="o",
                          label=f"{name} ({mode})")
        by_tokens.plot(curves["budgets"], [100 * (v or 0) for v in curves["budget_pass@1"]], style, marker="o",
                       label=mode)
    for axes, xlabel in ((by_n, "samples N"), (by_tokens, "token budget")):
        axes.set_xscale("log", base=2)
        axes.set_xlabel(xlabel)
        axes.set_ylabel("accuracy (%)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    by_n.set_title("best-of-N and majority vote")
    by_tokens.set_title("pass@1 against thinking length")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()
