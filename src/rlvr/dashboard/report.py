"""`rlvr report RUN_DIR`: one self-contained HTML file (charts, summary, config, sample groups).

No script and no external resource: it opens offline and can be attached to a paper. Completions,
prompts and the config are untrusted text and are always escaped.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from rlvr.dashboard.charts import line_chart
from rlvr.dashboard.run_data import RunData, read_run

# chart title -> the metrics drawn in it
CHARTS: dict[str, tuple[str, ...]] = {
    "reward and accuracy": ("reward/mean", "accuracy", "eval/strict"),
    "KL to the reference": ("kl",),
    "clip fractions": ("clip_low_fraction", "clip_high_fraction"),
    "entropy": ("entropy",),
    "completion length (tokens)": ("completion_length/p10", "completion_length/p50", "completion_length/p90",
                                   "completion_length/max"),
    "reflection and format": ("reflection_rate", "format_share"),
    "groups without reward spread": ("zero_variance_fraction",),
    "step time (s)": ("step_seconds",),
    "completion tokens per second": ("tokens_per_second",),
}
SHOWN_GROUPS = 6


def write_report(run_dir: Path, output: Path | None = None) -> Path:
    run = read_run(run_dir)
    path = output or run_dir / "report.html"
    path.write_text(render(run), encoding="utf-8")
    return path


def render(run: RunData) -> str:
    body = [f"<h1>rlvr run: {escape(str(run.path))}</h1>"]
    body += [f'<p class="problem">{escape(p)}</p>' for p in run.problems]
    body += ["<h2>Summary</h2>", _summary(run.summary)]
    body += ["<h2>Training</h2>", '<div class="charts">', *_charts(run.metrics), "</div>"]
    body += ["<h2>Sample groups</h2>", *(_group(g) for g in run.groups[-SHOWN_GROUPS:])]
    if not run.groups:
        body.append("<p>No groups recorded (sample_every = 0, or no step yet).</p>")
    body += ["<h2>Config</h2>", f"<pre>{escape(run.config) or 'config.yaml not found'}</pre>"]
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto} .charts{display:flex;flex-wrap:wrap;gap:8px} "
             "table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:3px 6px} .problem{color:#b45309} "
             "pre.completion{white-space:pre-wrap;background:#f6f6f6;margin:2px 0;padding:4px}")
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>rlvr report</title><style>{style}</style></head>'
            f'<body>{"".join(body)}</body></html>')


def _charts(metrics: list[dict[str, Any]]) -> list[str]:
    steps = [m.get("step", i + 1) for i, m in enumerate(metrics)]
    charts = []
    for title, keys in CHARTS.items():
        present = [k for k in keys if any(k in m for m in metrics)]
        if present:
            charts.append(line_chart(title, steps, {k: [number(m.get(k)) for m in metrics] for k in present}))
    return charts


def _summary(summary: dict[str, Any] | None) -> str:
    if not summary:
        return "<p>No summary.json yet (the run has not finished).</p>"
    rows = []
    for alone in (False, True):  # with the training prompt, then the question alone (no example exchange)
        for block in ("before", "after", "gain"):
            value = summary.get(block)
            value = value.get("alone") if alone and isinstance(value, dict) else value
            if isinstance(value, dict) and "strict" in value:
                cells = "".join(f"<td>{_interval(value.get(mode))}</td>" for mode in ("strict", "lenient"))
                rows.append(f"<tr><th>{block}{', the question alone' if alone else ''}</th>{cells}</tr>")
    table = f"<table><tr><th></th><th>strict</th><th>lenient</th></tr>{''.join(rows)}</table>" if rows else ""
    return table + f"<pre>{escape(json.dumps(summary, indent=1, default=str))}</pre>"


def _group(group: dict[str, Any]) -> str:
    prompt = group.get("prompt")
    prompt_text = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False)
    rows = "".join(
        f"<tr><td>{_fmt(r)}</td><td>{_fmt(a)}</td><td><pre class=\"completion\">{escape(str(c))}</pre></td></tr>"
        for c, r, a in zip(group.get("completions", []), group.get("rewards", []), group.get("advantages", []))
    )
    return (f"<h3>step {escape(str(group.get('step', '?')))}</h3><pre>{escape(str(prompt_text))}</pre>"
            f"<table><tr><th>reward</th><th>advantage</th><th>completion</th></tr>{rows}</table>")


def _interval(block: Any) -> str:
    if not isinstance(block, dict) or "mean" not in block:
        return "–"
    low, high = block.get("low", float("nan")), block.get("high", float("nan"))
    return escape(f"{100 * block['mean']:.1f}% [{100 * low:.1f}, {100 * high:.1f}]")


def number(value: Any) -> float | None:
    """A metric value as a float, or None (a gap in the chart) when it is not a number."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _fmt(value: Any) -> str:
    return f"{value:+.2f}" if isinstance(value, (int, float)) else escape(str(value))
