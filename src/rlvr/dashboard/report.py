"""`rlvr report RUN_DIR [RUN_DIR ...]`: one self-contained HTML file (charts, summary, sample groups, config).

No script and no external resource: it opens offline and can be attached to a paper. The charts have
axes with tick values, a legend and values on hover (CSS); several runs are overlaid, one line each.
The sample groups are filtered by step and by reward with CSS alone (radio buttons). Completions,
prompts and the config are untrusted text and are always escaped.
"""

from __future__ import annotations

import json
import math
from html import escape
from itertools import accumulate
from pathlib import Path
from typing import Any

from rlvr.dashboard.charts import CHART_CSS, line_chart
from rlvr.dashboard.run_data import RunData, read_run
from rlvr.run.metrics import signed
from rlvr.run.tally import time_line

# chart title -> the metrics drawn in it
CHARTS: dict[str, tuple[str, ...]] = {
    "reward and accuracy": ("reward/mean", "accuracy", "eval/strict", "eval/alone/strict"),
    "KL to the reference": ("kl",),
    "clip fractions": ("clip_low_fraction", "clip_high_fraction"),
    "entropy": ("entropy",),
    "completion length (tokens)": ("completion_length/p10", "completion_length/p50", "completion_length/p90",
                                   "completion_length/max"),
    "reflection and format": ("reflection_rate", "format_share"),
    "groups without reward spread": ("zero_variance_fraction",),
    "conversations (per trajectory)": ("env/turns", "env/tool_calls", "env/tool_errors", "env/tool_timeouts",
                                       "env/guesses"),
    "step time (s)": ("step_seconds",),
    "completion tokens per second": ("tokens_per_second",),
}
X_AXES = {"step": "step", "time": "wall-clock (minutes of training steps)"}
SHOWN_GROUPS = 120  # the latest recorded groups in the report
STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:auto} .charts{display:flex;flex-wrap:wrap;gap:8px} "
         "table{border-collapse:collapse;margin:4px 0} td,th{border:1px solid #ccc;padding:3px 6px;text-align:left} "
         ".problem{color:#b45309} pre.completion{white-space:pre-wrap;background:#f6f6f6;margin:2px 0;padding:4px} "
         ".filters label{margin-right:8px} .filters input{margin-right:2px} "
         "pre.env{white-space:pre-wrap;background:#eef6ff;border-left:3px solid #2563eb;margin:2px 0;padding:4px} "
         ".turn .role{font-size:11px;color:#6b7280} " + CHART_CSS)


def write_report(run_dir: Path | list[Path], output: Path | None = None, x: str = "step") -> Path:
    """The report of one run (written into it by default) or of several overlaid (output required)."""
    dirs = run_dir if isinstance(run_dir, list) else [run_dir]
    runs = [read_run(d) for d in dirs]
    path = output or dirs[0] / "report.html"
    path.write_text(render(runs, x=x), encoding="utf-8")
    return path


def render(runs: RunData | list[RunData], x: str = "step") -> str:
    runs = runs if isinstance(runs, list) else [runs]
    several = len(runs) > 1
    heading = "rlvr runs" if several else f"rlvr run: {escape(str(runs[0].path))}"
    body = [f"<h1>{heading}</h1>"]
    for i, run in enumerate(runs):
        body += [f"<h2>Summary{': ' + escape(label(run, i, several)) if several else ''}</h2>"]
        body += [f'<p class="problem">{escape(p)}</p>' for p in run.problems]
        body.append(summary_tables(run.summary))
    body += ["<h2>Training</h2>", '<div class="charts">', *charts(runs, x), "</div>"]
    for i, run in enumerate(runs):
        body += [f"<h2>Sample groups{': ' + escape(label(run, i, several)) if several else ''}</h2>",
                 sample_groups(run.groups[-SHOWN_GROUPS:], f"r{i}")]
        body += [f"<details><summary>config.yaml</summary><pre>{escape(run.config) or 'config.yaml not found'}"
                 "</pre></details>"]
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>rlvr report</title><style>{STYLE}</style>'
            f'</head><body>{"".join(body)}</body></html>')


def label(run: RunData, index: int, several: bool) -> str:
    """A run's name in legends: its folder, numbered when several runs are shown."""
    return f"{index}: {run.path.name}" if several else run.path.name


def x_values(metrics: list[dict[str, Any]], x: str) -> list[float]:
    """Each logged step's position: its step, or the minutes of training steps up to its end (`time`).

    >>> x_values([{"step": 1, "step_seconds": 30}, {"step": 2, "step_seconds": 90}], "time")
    [0.5, 2.0]
    """
    if x == "time":  # a step whose time is not a finite number adds none
        return list(accumulate(_finite(number(m.get("step_seconds"))) / 60 for m in metrics))
    return [m["step"] for m in metrics]  # a number in every row read_run keeps


def charts(runs: list[RunData], x: str = "step") -> list[str]:
    """One chart per CHARTS entry with data: a line per metric (and per run when several, by name)."""
    several, out = len(runs) > 1, []
    for title, keys in CHARTS.items():
        lines: dict[str, dict[float, float | None]] = {}
        for i, run in enumerate(runs):
            xs = x_values(run.metrics, x)
            for key in keys:
                if any(key in m for m in run.metrics):
                    name = f"{label(run, i, several)}: {key}" if several else key
                    lines[name] = {px: number(m.get(key)) for px, m in zip(xs, run.metrics)}
        if lines:
            xs_all = sorted({px for line in lines.values() for px in line})
            out.append(line_chart(title, xs_all, {n: [line.get(px) for px in xs_all] for n, line in lines.items()},
                                  x_label=X_AXES[x]))
    return out


def summary_tables(summary: dict[str, Any] | None) -> str:
    """Held-out accuracy before and after (with the training prompt, and the question alone), the gain in
    points with its interval; the run's other numbers; the raw summary.json folded away."""
    if not summary:
        return "<p>No summary.json yet (the run has not finished).</p>"
    rows = []
    for alone in (False, True):
        for block in ("before", "after", "gain"):
            value = summary.get(block)
            value = value.get("alone") if alone and isinstance(value, dict) else value
            if isinstance(value, dict) and "strict" in value:
                show = _points if block == "gain" else _percent
                cells = "".join(f"<td>{show(value.get(mode))}</td>" for mode in ("strict", "lenient"))
                rows.append(f"<tr><th>{block}{', the question alone' if alone else ''}</th>{cells}</tr>")
    accuracy = ("<table class=\"accuracy\"><tr><th>held-out accuracy (95% interval)</th><th>strict</th>"
                f"<th>lenient</th></tr>{''.join(rows)}</table>") if rows else ""
    others = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(_scalar(v))}</td></tr>" for k, v in summary.items()
                     if not isinstance(v, (dict, list)))
    raw = escape(json.dumps(summary, indent=1, default=str))
    time = summary.get("time")
    timing = f'<p class="time">{escape(time_line(time))}</p>' if isinstance(time, dict) else ""
    return (accuracy + (f'<table class="numbers">{others}</table>' if others else "") + timing
            + f"<details><summary>summary.json</summary><pre>{raw}</pre></details>")


def sample_groups(groups: list[dict[str, Any]], key: str) -> str:
    """The groups, each completion with its reward and advantage, and CSS-only filters by step and reward."""
    if not groups:
        return "<p>No groups recorded (sample_every = 0, or no step yet).</p>"
    steps = sorted({s for g in groups if isinstance(s := g.get("step"), int)})
    radios, rules = [], []
    for name, value, text in [("step", "all", "all steps"), *[("step", str(s), f"step {s}") for s in steps],
                              ("reward", "all", "all rewards"), ("reward", "pos", "reward > 0"),
                              ("reward", "nonpos", "reward ≤ 0")]:
        ident = f"{key}-{name}-{value}"
        radios.append(f'<input type="radio" name="{key}-{name}" id="{ident}"{" checked" if value == "all" else ""}>'
                      f'<label for="{ident}">{escape(text)}</label>')
        if name == "step" and value != "all":
            rules.append(f'#{ident}:checked ~ .groups .group:not([data-step="{value}"]){{display:none}}')
        elif name == "reward" and value != "all":
            rules.append(f"#{ident}:checked ~ .groups tr.c:not(.{value}){{display:none}}")
    return (f'<style>{" ".join(rules)}</style><div class="filters samples" id="{key}-samples">{"".join(radios)}'
            f'<div class="groups">{"".join(_group(g) for g in groups)}</div></div>')


def _group(group: dict[str, Any]) -> str:
    prompt = group.get("prompt")
    prompt_text = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False)
    completions = group.get("completions", [])
    shown = [_transcript(t) for t in group["transcripts"]] if isinstance(group.get("transcripts"), list) else [
        f'<pre class="completion">{escape(str(c))}</pre>' for c in completions]
    # the columns the rewards logged with TRL's log_extra (rlvr.rewards.trainer_hooks), one value a completion
    logged = group.get("extra")
    extra = {k: v for k, v in logged.items() if isinstance(v, list)} if isinstance(logged, dict) else {}
    rows = "".join(
        f'<tr class="c {_reward_class(r)}"><td>{escape(signed(r))}</td>'
        f"<td>{escape(signed(a))}</td><td>{c}</td>"
        + "".join(f"<td>{escape(_cell(v[i] if i < len(v) else None))}</td>" for v in extra.values()) + "</tr>"
        for i, (c, r, a) in enumerate(zip(shown, group.get("rewards", []), group.get("advantages", [])))
    )
    step = group.get("step")
    heads = "".join(f"<th>{escape(k)}</th>" for k in extra)
    return (f'<div class="group" data-step="{step if isinstance(step, int) else ""}"><h3>step '
            f"{escape(str(step if step is not None else '?'))}</h3><pre>{escape(str(prompt_text))}</pre>"
            f"<table><tr><th>reward</th><th>advantage</th><th>completion</th>{heads}</tr>{rows}</table></div>")


def _cell(value: Any) -> str:
    """A logged value as a table cell: text as it is, anything else as JSON.

    >>> _cell("ok"), _cell(3), _cell({"a": [1]}), _cell(None)
    ('ok', '3', '{"a": [1]}', '')
    """
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _transcript(messages: Any) -> str:
    """A multi-turn sample: the model's messages as completions, the environment's (tool output, feedback)
    marked apart by role."""
    if not isinstance(messages, list):
        return f'<pre class="completion">{escape(str(messages))}</pre>'
    parts = []
    for m in messages:
        role = str(m.get("role", "?")) if isinstance(m, dict) else "?"
        text = escape(str(m.get("content", "") if isinstance(m, dict) else m))
        kind = "completion" if role == "assistant" else "env"
        parts.append(f'<div class="turn {kind}"><span class="role">{escape(role)}</span>'
                     f'<pre class="{kind}">{text}</pre></div>')
    return "".join(parts)


def _percent(block: Any) -> str:
    """An accuracy with its interval: "62.5% [40.1, 81.2]"; "–" when summary.json holds no number for it."""
    mean, low, high = _interval(block)
    return "–" if mean is None else escape(f"{100 * mean:.1f}% [{100 * low:.1f}, {100 * high:.1f}]")


def _points(block: Any) -> str:
    """A gain in percentage points: "+12.5 points [+4.1, +20.3]"."""
    mean, low, high = _interval(block)
    return "–" if mean is None else escape(f"{100 * mean:+.1f} points [{100 * low:+.1f}, {100 * high:+.1f}]")


def _interval(block: Any) -> tuple[float | None, float, float]:
    """(mean, low, high) of a summary block; mean None when it is not a number, NaN for a bound that is not.

    >>> _interval({"mean": 0.5, "low": 0.25, "high": "?"})
    (0.5, 0.25, nan)
    >>> _interval({"mean": "0.5"})[0] is None
    True
    """
    if not isinstance(block, dict):
        return None, math.nan, math.nan
    low, high = number(block.get("low")), number(block.get("high"))
    return number(block.get("mean")), math.nan if low is None else low, math.nan if high is None else high


def _scalar(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def number(value: Any) -> float | None:
    """A metric value as a float, or None (a gap in the chart) when it is not a number."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _finite(value: float | None) -> float:
    """A number for a sum: `value`, or 0 when it is missing, infinite or NaN."""
    return value if value is not None and math.isfinite(value) else 0.0


def _reward_class(reward: Any) -> str:
    """What the reward filters match: pos (> 0), nonpos (≤ 0), or unscored (neither: no reward to filter on)."""
    value = number(reward)
    if value is None or math.isnan(value):
        return "unscored"
    return "pos" if value > 0 else "nonpos"
