"""Behaviour pinned: every training loop's tiny runs (tests/pins/jobs.py) give the metrics, weights and
summaries recorded in recorded.json, on any CPU.

Another CPU's kernels sum in another order. Measured: the same code on two machines of this kind (the AMD EPYC
that recorded these numbers and another AMD EPYC, 2026-11-29: other weights digests, on 1 thread or 2) moved
the weights' sums and the learning metrics by up to 3e-5 relative after 4-6 steps, and the noise-floor
diagnostics by far more than themselves; an Intel Xeon likewise (PPO's loss, 1.15e-7 here, was -9.3e-9
there). So the weights and every learning metric
are compared within a relative 1e-4 (a real change moves them by orders more: the last test), and the
diagnostics that measure rounding noise only against a floor (`FLOORS`). The jobs pin their precision (fp32),
so that `model.dtype: auto` choosing bf16 on a CPU with AMX cannot move them. On one machine a refactor is
checked bit for bit with `python -m tests.pins.jobs --out/--compare`.

A change that moves these numbers on purpose records them again, on any machine, in a commit that says why:

    .venv/bin/python -m tests.pins.jobs --record      # runs every job, rewrites tests/pins/recorded.json
"""

import json
import math

import pytest

from .jobs import JOBS, RECORDED, run_jobs

RELATIVE, ABSOLUTE = 1e-4, 1e-7
# Diagnostics at fp32's rounding noise, compared within an absolute floor: the sampler/trainer log-prob gap (~1e-6
# per token in fp32; what matters is that it stays at that floor), and the loss, a sum of terms that cancel
# (whitened advantages: ~1e-7, of either sign, on one CPU or another).
FLOORS = {"sampler/logp_abs_diff_mean": 1e-4, "sampler/logp_abs_diff_max": 1e-4, "loss": 1e-6}


@pytest.fixture(scope="module")
def ran():
    return run_jobs(list(JOBS))


def close(a, b, floor: float = ABSOLUTE) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str) or a is None:
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=RELATIVE, abs_tol=floor)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], FLOORS.get(k, ABSOLUTE)) for k in a)
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
    for key, factor in (("loss", 1 + 1e-3), ("kl", 1 + 1e-3), ("sampler/logp_abs_diff_max", 100.0)):
        moved = json.loads(json.dumps(recorded["metrics"]))
        moved[-1][key] *= factor
        assert close(recorded["metrics"], recorded["metrics"]) and not close(moved, recorded["metrics"]), key
    sums = json.loads(json.dumps(recorded["sums"]))
    name = next(iter(sums))
    sums[name][1] *= 1 + 1e-3
    assert not close(sums, recorded["sums"])


def test_the_pins_hold_across_summation_orders():
    """What another CPU's kernels do stays within the tolerances: the largest differences another machine of this
    kind gave (and PPO's loss as an Intel Xeon gave it), written into the recorded numbers."""
    recorded = json.loads(RECORDED.read_text())
    grpo, ppo = (json.loads(json.dumps(recorded[job]["metrics"])) for job in ("grpo", "ppo"))
    grpo[0]["sampler/logp_abs_diff_max"] = 3.337860107421875e-06  # (5.2e-6 recorded)
    grpo[1]["loss"] *= 1 + 2.7e-5  # (the ahead1 job's step-2 loss)
    ppo[0]["loss"] = -9.3e-9  # (1.15e-7 recorded; -1.6e-8 on the other EPYC)
    assert close(grpo, recorded["grpo"]["metrics"]) and close(ppo, recorded["ppo"]["metrics"])
    lora = json.loads(json.dumps(recorded["lora"]["sums"]))
    name = next(iter(lora))
    lora[name][0] *= 1 + 1.4e-5  # (a LoRA adapter's sum after 4 steps at lr 1e-2)
    assert close(lora, recorded["lora"]["sums"])
