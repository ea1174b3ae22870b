"""`rlvr report` opened in headless Chromium: two runs overlaid, read from the page as a person sees it
(axes, legend, values on hover, the sample filters), and hostile completion text staying text.

Skipped, with the reason, where Chromium or playwright-core is missing; `.ci/run` installs both.
"""

import json
import subprocess

import pytest

from rlvr.dashboard.report import write_report
from rlvr.grpo.trainer import train_grpo

from ..train.test_step import DIGITS, tiny_config
from .test_pages import CHROMIUM, HERE, pytestmark  # noqa: F401  (the same skips)

HOSTILE = "<script>window.__pwned = true; alert(1)</script><img src=x onerror=alert(2)>"


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    runs = []
    for name, seed in (("a", 0), ("b", 1)):
        train_grpo(tiny_config(tmp / name, DIGITS, "sample_every=1", f"seed={seed}", steps=3))
        runs.append(tmp / name / "run")
    with (runs[0] / "samples.jsonl").open("a") as f:  # an untrusted completion that tries to run code
        f.write(json.dumps({"step": 3, "prompt": "p", "completions": [HOSTILE, "fine"], "rewards": [0.75, -0.5],
                            "advantages": [0.25, -0.25]}) + "\n")
    report = write_report(runs, tmp / "compare.html")
    out = subprocess.run(["node", str(HERE / "report.mjs"), report.as_uri(), json.dumps({"step": 2})],
                         capture_output=True, text=True, timeout=120,
                         env={"CHROMIUM": CHROMIUM, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout), runs


def metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_the_charts_have_axes_with_ticks_spanning_the_runs_numbers(seen):
    page, runs = seen
    chart = next(c for c in page["charts"] if c["title"] == "KL to the reference")
    xs = [float(t) for t in chart["xTicks"]]
    ys = [float(t) for t in chart["yTicks"]]
    steps = [m["step"] for m in metrics(runs[0])]
    values = [m["kl"] for run in runs for m in metrics(run)]
    assert chart["xLabel"] == "step" and xs == sorted(xs) and xs[0] <= min(steps) and xs[-1] >= max(steps)
    assert ys == sorted(ys) and ys[0] <= min(values) and ys[-1] >= max(values) and len(ys) >= 3


def test_several_runs_are_overlaid_with_a_legend_naming_each_line(seen):
    page, runs = seen
    chart = next(c for c in page["charts"] if c["title"] == "reward and accuracy")
    assert chart["legend"] == ["0: run: reward/mean", "0: run: accuracy", "1: run: reward/mean", "1: run: accuracy"]
    lines = dict(chart["series"])
    for i, run in enumerate(runs):
        assert [float(v) for v in lines[f"{i}: run: accuracy"].split()] == pytest.approx(
            [m["accuracy"] for m in metrics(run)])


def test_hovering_a_point_shows_its_value(seen):
    page, runs = seen
    chart = page["charts"][0]
    assert len(page["hover"]) == sum(len(v.split()) for _, v in chart["series"])  # every point of the chart
    on_top = [point for point in page["hover"] if point["onTop"]]  # (a point under another cannot be hovered)
    assert len({p["series"] for p in on_top}) >= 2
    for point in on_top:
        run = runs[int(point["series"].split(":")[0])]
        key = point["series"].split(": ", 2)[2]
        value = next(m[key] for m in metrics(run) if m["step"] == point["x"])
        assert point["before"] == "hidden" and point["during"] == "visible"
        assert point["text"].startswith(f"{point['series']}: {value:.4g} (step {int(point['x'])})")


def test_the_sample_groups_filter_by_step_and_by_reward(seen):
    page, _ = seen
    assert set(page["groupsAtStep"]) == {"2"} and len(page["groupsAtStep"]) < len(page["groupsAll"])
    assert all(float(r) > 0 for r in page["rewardsPositive"]) and page["rewardsPositive"]
    assert all(float(r) <= 0 for r in page["rewardsNonPositive"]) and page["rewardsNonPositive"]
    assert len(page["rewardsPositive"]) + len(page["rewardsNonPositive"]) == len(page["rewardsAll"])


def test_the_summary_is_tables_with_gains_in_points_and_the_raw_json_folded(seen):
    page, _ = seen
    gain = next(row for row in page["summaryCells"] if row[0] == "gain")
    assert all(cell.endswith("]") and " points [" in cell for cell in gain[1:])
    assert page["rawFolded"] is True


def test_hostile_completion_text_stays_text_and_nothing_is_fetched(seen):
    page, _ = seen
    assert HOSTILE in page["completions"]
    assert page["scripts"] == 0 and page["pwned"] is False and page["dialogs"] == 0 and page["requests"] == []
