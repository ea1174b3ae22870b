"""The dashboard in a real browser: headless Chromium (Debian's package) driven by playwright-core.

Skipped, with the reason, where either is missing; `.ci/run` installs both.
"""

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from rlvr.advantages import group_advantages
from rlvr.dashboard.server import make_server, start_in_background
from rlvr.grpo.trainer import train_grpo

from ..train.test_step import DIGITS, tiny_config

HERE = Path(__file__).parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium: apt-get install chromium (.ci/run does)"),
    pytest.mark.skipif(not (HERE / "node_modules" / "playwright-core").is_dir() or shutil.which("node") is None,
                       reason="no playwright-core: npm install --prefix tests/browser (.ci/run does)"),
]


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    train_grpo(tiny_config(tmp, DIGITS, "sample_every=1", steps=2))
    run = tmp / "run"
    with (run / "samples.jsonl").open("a") as f:  # an untrusted completion that tries to run code
        f.write(json.dumps({"step": 3, "prompt": "p",
                            "completions": ["<script>window.__pwned = true; alert(1)</script>"],
                            "rewards": [0.75], "advantages": [0.25]}) + "\n")
    rng = random.Random(0)
    cases = [{"rewards": [round(rng.uniform(-1, 2), 2) for _ in range(rng.randint(2, 10))],
              "baseline": rng.choice(["group_mean", "leave_one_out"]), "scale": rng.choice(["group_std", "none"]),
              "std_estimator": rng.choice(["population", "unbiased"]), "clip": rng.choice([0.1, 0.28])}
             for _ in range(3)]
    server = make_server([run], port=0)
    start_in_background(server)
    try:
        out = subprocess.run(["node", str(HERE / "drive.mjs"), f"http://127.0.0.1:{server.server_address[1]}",
                              json.dumps({"explorer": cases})],
                             capture_output=True, text=True, timeout=120,
                             env={"CHROMIUM": CHROMIUM, "PATH": "/usr/bin:/bin"})
    finally:
        server.shutdown()
        server.server_close()
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout), run, cases


def test_the_page_loads_and_its_charts_hold_the_runs_numbers(seen):
    page, run, _ = seen
    assert page["title"] == "rlvr dashboard"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    charts = {(label, name): [float(v) for v in values.split()] for label, name, values in page["series"]}
    assert charts[("reward and accuracy: reward/mean", "0: run")] == pytest.approx([m["reward/mean"] for m in metrics])
    assert charts[("KL to the reference: kl", "0: run")] == pytest.approx([m["kl"] for m in metrics])


def test_the_sample_browser_shows_completions_with_their_rewards(seen):
    page, run, _ = seen
    first = json.loads((run / "samples.jsonl").read_text().splitlines()[0])
    assert first["completions"][0] in page["completions"]
    assert [f"{first['rewards'][0]:+.2f}", f"{first['advantages'][0]:+.2f}", first["completions"][0]] in page["rows"]


def test_a_script_in_a_completion_is_shown_as_text_and_never_runs(seen):
    page, _, _ = seen
    assert "<script>window.__pwned = true; alert(1)</script>" in page["completions"]
    assert page["scripts"] == 0 and page["pwned"] is False and page["dialogs"] == 0


def test_the_explorer_follows_every_edit_with_group_advantages(seen):
    """Each typed reward and chosen option updates the page by itself (no Update button pressed)."""
    page, _, cases = seen
    for case, shown in zip(cases, page["explorer"], strict=True):
        options = {k: case[k] for k in ("baseline", "scale", "std_estimator")}
        expected = group_advantages(torch.tensor([case["rewards"]]), **options)[0].tolist()
        assert shown["advantages"] == pytest.approx(expected, abs=0.006)
        assert f"at most {1 + case['clip']:.2f}×" in shown["text"]
