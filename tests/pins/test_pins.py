"""Behaviour pinned: every training loop's tiny runs (tests/pins/jobs.py) give the metrics, weights and
summaries recorded in recorded.json. Compared within a relative 1e-5, not bit for bit, so that another CPU's
kernels pass; on one machine a refactor is checked bit for bit with `python -m tests.pins.jobs --out/--compare`.
A change that moves these numbers on purpose records them again (`--record`) in a commit that says why."""

import json
import math

import pytest

from .jobs import JOBS, RECORDED, run_jobs

RELATIVE, ABSOLUTE = 1e-5, 1e-7


@pytest.fixture(scope="module")
def ran():
    return run_jobs(list(JOBS))


def close(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str) or a is None:
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=RELATIVE, abs_tol=ABSOLUTE)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("job", list(JOBS))
def test_the_job_gives_the_recorded_numbers(ran, job):
    recorded = json.loads(RECORDED.read_text())[job]
    for part in ("metrics", "sums", "summary"):
        assert close(ran[job][part], recorded[part]), f"{job} {part} moved: {json.dumps(ran[job][part])[:2000]}"


def test_the_pins_catch_a_moved_number():
    recorded = json.loads(RECORDED.read_text())["grpo"]
    moved = json.loads(json.dumps(recorded["metrics"]))
    moved[-1]["loss"] *= 1 + 1e-3
    assert close(recorded["metrics"], recorded["metrics"]) and not close(moved, recorded["metrics"])
