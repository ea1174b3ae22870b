"""`rlvr report EVAL_DIR`: the results of an `rlvr eval` folder as one self-contained HTML page.

The page holds the results table (greedy, pass@1, pass@k, maj@k, best-of-N; strict and lenient, as the
console and report.md show them), the accuracy-against-N and against-budget curves (curves.png, inlined),
every setting that decided the numbers, and the first problems with their greedy completion and verdicts.
Like the run report it opens offline, and every text from the model or the data is escaped.
"""

from __future__ import annotations

import base64
import json
from html import escape
from pathlib import Path
from typing import Any

from rlvr.errors import UserError
from rlvr.evaluate.report import headline
from rlvr.evaluate.store import EvalStore

SHOWN_PROBLEMS = 20
STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:auto} table{border-collapse:collapse;margin:4px 0} "
         "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top} "
         "pre{white-space:pre-wrap;background:#f6f6f6;margin:2px 0;padding:4px}")


def kind_of(folder: Path) -> str:
    """`run` (rlvr train, sft, rm), `eval` (rlvr eval) or a one-line UserError saying what the folder is not."""
    if not folder.is_dir():
        raise UserError(f"{folder} is not a directory: give a run directory (rlvr train, sft, rm) or an "
                        "rlvr eval output folder")
    if (folder / "config.yaml").is_file() or (folder / "metrics.jsonl").is_file():
        return "run"
    if (folder / "settings.json").is_file():
        return "eval"
    raise UserError(f"{folder} is neither a run directory (no config.yaml or metrics.jsonl) nor an evaluation "
                    "(no settings.json): give a folder that rlvr train, sft, rm or eval wrote")


def write_eval_report(folder: Path, output: Path | None = None) -> Path:
    """The page of the evaluation in `folder` (written into it by default)."""
    summary_file = folder / "summary.json"
    if (folder / "sample_summary.json").is_file():
        raise UserError(f"{folder} is what rlvr sample wrote (rejection sampling: its summary is "
                        "sample_summary.json, beside the dataset it names): rlvr report shows a training run or "
                        "an rlvr eval folder")
    done = len(EvalStore(folder).read())
    if not summary_file.is_file():
        raise UserError(f"{folder} is an evaluation that has not finished ({done} problems sampled, no summary.json "
                        "yet): run the same rlvr eval command again to finish it")
    try:
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
    except ValueError:
        raise UserError(f"{summary_file} is not valid JSON: run the same rlvr eval command again") from None
    if summary.get("problems", done) != done or summary.get("settings") != _read_settings(folder):
        raise UserError(f"{folder} is an evaluation that has not finished ({done} problems sampled; its summary.json "
                        f"is of an earlier one, {summary.get('problems')} problems): run the same rlvr eval command "
                        "again to finish it")
    path = output or folder / "report.html"
    path.write_text(render_eval(folder, summary), encoding="utf-8")
    return path


def _read_settings(folder: Path) -> Any:
    try:
        return json.loads((folder / "settings.json").read_text(encoding="utf-8"))
    except ValueError:
        raise UserError(f"{folder / 'settings.json'} is not valid JSON: delete {folder} and run the rlvr eval "
                        "command again") from None


def render_eval(folder: Path, summary: dict[str, Any]) -> str:
    s = summary["settings"]
    body = [f"<h1>rlvr eval: {escape(str(s['benchmark']))} · {escape(str(s['model']))}</h1>",
            f"<p>{summary['strict']['problems']} problems · n = {s['samples']} · T = {s['temperature']}, top-p "
            f"{s['top_p']} · {s['max_new_tokens']} tokens · {escape(str(s['template']))} template</p>",
            "<h2>Results</h2>", "<table><tr><th></th><th>strict</th><th>lenient</th></tr>"]
    body += [f"<tr><td>{escape(m)}</td><td>{escape(a)}</td><td>{escape(b)}</td></tr>" for m, a, b in headline(summary)]
    body.append("</table>")
    curves = folder / "curves.png"
    if curves.is_file():
        data = base64.b64encode(curves.read_bytes()).decode()
        body.append(f'<h2>Curves</h2><img alt="accuracy against N and against the token budget" '
                    f'src="data:image/png;base64,{data}" style="max-width:100%">')
    body += ["<h2>Settings</h2>", "<table>"]
    body += [f"<tr><td>{escape(str(key))}</td><td>{escape(json.dumps(value, ensure_ascii=False))}</td></tr>"
             for key, value in s.items()]
    body += ["</table>", "<h2>Problems</h2>", _problems(folder)]
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>rlvr eval {escape(str(s['benchmark']))}"
            f"</title><style>{STYLE}</style></head><body>{''.join(body)}</body></html>")


def _problems(folder: Path) -> str:
    """The first problems: prompt, gold answer, greedy completion with its verdicts, and the samples' tally."""
    records = EvalStore(folder).read()[:SHOWN_PROBLEMS]
    rows = ["<table><tr><th>problem</th><th>gold</th><th>greedy completion (strict / lenient)</th>"
            "<th>samples right (strict)</th></tr>"]
    for r in records:
        greedy = (f"<pre>{escape(r.greedy.text)}</pre>{r.greedy.correct['strict']} / {r.greedy.correct['lenient']}"
                  if r.greedy else "–")
        right = sum(1 for sample in r.samples if sample.correct["strict"])
        rows.append(f"<tr><td><pre>{escape(str(r.prompt))}</pre></td><td>{escape(str(r.gold))}</td><td>{greedy}</td>"
                    f"<td>{right} of {len(r.samples)}</td></tr>")
    rows.append("</table>")
    return "".join(rows)
