"""`rlvr report`: a self-contained HTML file that holds the run's numbers and shows completions as text."""

import json
import re

import pytest

from rlvr.cli import main
from rlvr.dashboard.report import write_report
from rlvr.grpo.trainer import train_grpo

from ..train.test_step import DIGITS, tiny_config


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    train_grpo(tiny_config(tmp, DIGITS, "sample_every=1", steps=3))
    return tmp / "run"


def chart_values(html, series):
    found = re.search(rf'data-series="{re.escape(series)}" data-values="([^"]*)"', html)
    return [float(v) for v in found.group(1).split()]


def test_the_charts_hold_the_runs_numbers(run_dir):
    html = write_report(run_dir).read_text()
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for key in ("reward/mean", "kl", "entropy", "completion_length/p50", "step_seconds", "reflection_rate"):
        assert chart_values(html, key) == pytest.approx([m[key] for m in metrics]), key


def test_it_is_self_contained_and_completions_are_text(run_dir):
    with (run_dir / "samples.jsonl").open("a") as f:
        f.write(json.dumps({"step": 9, "prompt": "<b>hi</b>", "completions": ["<script>alert(1)</script>"],
                            "rewards": [1.0], "advantages": [0.5]}) + "\n")
    html = write_report(run_dir, run_dir / "shared.html").read_text()
    assert "<script" not in html.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;hi&lt;/b&gt;" in html
    assert not re.search(r'\b(src|href)\s*=', html)  # nothing fetched when opened
    groups = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert groups[0]["step"] == 1 and len(groups[0]["completions"]) == len(groups[0]["rewards"])


def test_half_written_or_missing_files_are_messages(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward/mean": 0.5}\n{"step": 2, "rew')
    html = write_report(tmp_path).read_text()
    assert "metrics.jsonl line 2 is not complete JSON" in html and chart_values(html, "reward/mean") == [0.5]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no metrics.jsonl yet" in write_report(empty).read_text()


def test_cli(run_dir, tmp_path, capsys):
    assert main(["report", str(run_dir), "--output", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").is_file()
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_several_runs_need_one_output_and_time_puts_wall_clock_minutes_on_the_x_axis(run_dir, tmp_path, capsys):
    assert main(["report", str(run_dir), str(run_dir)]) == 2
    assert "give --output FILE" in capsys.readouterr().err
    out = tmp_path / "both.html"
    assert main(["report", str(run_dir), str(run_dir), "--output", str(out), "--x", "time"]) == 0
    html = out.read_text()
    assert 'data-series="0: run: kl"' in html and 'data-series="1: run: kl"' in html
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    minutes, elapsed = [], 0.0
    for m in metrics:
        elapsed += m["step_seconds"] / 60
        minutes.append(elapsed)
    points = [float(x) for x in re.findall(r'<g class="pt" data-series="0: run: kl" data-x="([^"]+)"', html)]
    assert points == pytest.approx(minutes) and "wall-clock (minutes of training steps)" in html


def test_multi_turn_samples_show_each_turn_with_tool_output_apart_and_escaped(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "reward/mean": 0.5}\n')
    turns = [{"role": "assistant", "content": "```python\nprint(347 * 28)\n```"},
             {"role": "tool", "content": "```output\n<script>alert(1)</script>9716\n```"},
             {"role": "assistant", "content": "\\boxed{9716}"}]
    (run / "samples.jsonl").write_text(json.dumps({
        "step": 1, "prompt": "What is 347 * 28?", "completions": ["\\boxed{9716}"], "rewards": [1.0],
        "advantages": [0.0], "transcripts": [turns]}) + "\n")
    html = write_report(run).read_text()
    assert html.count('<pre class="completion">') == 2 and html.count('<pre class="env">') == 1
    assert '<span class="role">tool</span><pre class="env">```output\n&lt;script&gt;alert(1)&lt;/script&gt;9716' in html
    assert "<script" not in html.lower()


def test_the_columns_rewards_logged_are_shown_beside_their_completions_escaped(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "reward/mean": 0.5}\n')
    (run / "samples.jsonl").write_text(json.dumps({
        "step": 1, "prompt": "2+2?", "completions": ["4", "5"], "rewards": [1.0, 0.0], "advantages": [1.0, -1.0],
        "extra": {"why": ["<b>right</b>", None], "parsed": [{"n": 4}, 5], "broken": "not a list"}}) + "\n")
    html = write_report(run).read_text()
    assert "<th>completion</th><th>why</th><th>parsed</th></tr>" in html
    assert '4</pre></td><td>&lt;b&gt;right&lt;/b&gt;</td><td>{&quot;n&quot;: 4}</td></tr>' in html
    assert '5</pre></td><td></td><td>5</td></tr>' in html


def test_rows_and_values_of_the_wrong_kind_are_skipped_and_named(tmp_path):
    """A metrics row whose step is not a number, a row that is not an object, a summary.json that is not one,
    text where numbers belong: the report shows the rest of the run and names what it skipped."""
    from .bad_runs import PROBLEMS, write_bad_runs

    runs = write_bad_runs(tmp_path)
    html = write_report(runs["rows"]).read_text()
    for problem in PROBLEMS:
        assert problem in html.replace("&quot;", '"')
    assert 'data-series="reward/mean" data-values="0.5 nan"' in html  # steps 1 and 3; "high" is a gap
    assert re.findall(r'<g class="pt" data-series="reward/mean" data-x="([^"]+)"', html) == ["1"]
    assert html.count('<div class="group"') == 1 and "caf\ufffd" in html
    for x in ("step", "time"):
        html = write_report(runs["numbers"], x=x).read_text()
        assert html.count("<td>–</td>") == 4 and "<td>long</td>" in html and chart_values(html, "kl") == [-1.7e308,
                                                                                                         1.7e308]
