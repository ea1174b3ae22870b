"""bench/learning.py: the numbers over seeds, and a report of finished runs (tiny model)."""

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlvr.config import save_config
from rlvr.grpo.trainer import train_grpo

from .distributed.launching import finish
from .train.test_step import DIGITS, tiny_config

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("learning", ROOT / "bench" / "learning.py")
learning = importlib.util.module_from_spec(spec)
spec.loader.exec_module(learning)


def test_over_seeds_is_the_mean_with_a_t_interval():
    agg = learning.over_seeds([0.1, 0.2, 0.6])
    sd = math.sqrt(((0.1 - 0.3) ** 2 + (0.2 - 0.3) ** 2 + (0.6 - 0.3) ** 2) / 2)
    assert agg["mean"] == pytest.approx(0.3) and agg["sd"] == pytest.approx(sd)
    assert agg["high"] - agg["mean"] == pytest.approx(4.303 * sd / math.sqrt(3))  # t with 2 degrees of freedom
    assert learning.over_seeds([0.4])["sd"] is None


def interval(mean, half=0.05):
    return {"mean": mean, "low": mean - half, "high": mean + half}


def run_record(after, curve):
    summary = {"seed": 0, "steps": curve[-1][0], "before": {"strict": interval(0.3), "n": 100},
               "after": {"strict": interval(after)}, "gain": {"strict": interval(after - 0.3, 0.1)}}
    return {"seed": 0, "summary": summary, "curve": [(s, interval(a), 100) for s, a in curve]}


def test_a_run_holds_when_it_ends_within_its_peaks_interval():
    fell = learning.per_run(run_record(0.5, [(0, 0.3), (5, 0.7), (10, 0.5)]))
    assert (fell["peak"], fell["peak_step"], fell["holds"]) == (0.7, 5, False)
    held = learning.per_run(run_record(0.68, [(0, 0.3), (5, 0.7), (10, 0.68)]))
    assert held["holds"]
    tie = learning.per_run(run_record(0.7, [(0, 0.3), (5, 0.7), (10, 0.7)]))
    assert tie["peak_step"] == 5  # the earliest of equal peaks


def test_the_report_of_finished_runs(tmp_path):
    for seed in (0, 1):
        train_grpo(tiny_config(tmp_path / f"seed-{seed}", DIGITS, f"seed={seed}", "threads=1", "eval_every=2",
                               "data.validation_size=3", "keep_best=true", steps=4))
    runs = [str(tmp_path / f"seed-{seed}" / "run") for seed in (0, 1)]
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "learning.py"), "--report", *runs,
                          "--out", str(tmp_path / "report")], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "mean ± sd (2 seeds)" in out.stdout and "chosen by validation" in out.stdout
    written = json.loads((tmp_path / "report" / "learning.json").read_text())
    assert [r["seed"] for r in written["rows"]] == [0, 1]
    assert [s for s, _, _ in written["runs"][0]["curve"]] == [0, 2, 4]
    assert (tmp_path / "report" / "curves.png").stat().st_size > 0 and (tmp_path / "report" / "metrics.png").is_file()


def ctrl_c_after(command, metrics, steps):
    """(exit code, stderr) of `command` (a study) sent Ctrl-C once its first run logged `steps` steps to
    `metrics`: as a terminal does, to the whole foreground group, the study and its runs."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               start_new_session=True)
    deadline = time.monotonic() + 300
    while not (metrics.is_file() and len(metrics.read_text().splitlines()) >= steps):
        assert process.poll() is None and time.monotonic() < deadline, "the first run never got going"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    code, _, err = finish(process, 120, "the study after Ctrl-C ")
    return code, err.strip()


def test_ctrl_c_stops_the_runs_at_checkpoints_in_one_line(tmp_path):
    config = tmp_path / "tiny.yaml"
    save_config(tiny_config(tmp_path, DIGITS, "eval_every=1", steps=40), config)
    out = tmp_path / "study"
    command = [sys.executable, str(ROOT / "bench" / "learning.py"), "--config", str(config), "--seeds", "0", "1",
               "--parallel", "2", "--out", str(out)]
    code, err = ctrl_c_after(command, out / "seed-0" / "metrics.jsonl", 2)
    assert code == 1 and err.startswith("bench/learning.py: interrupted;") and "\n" not in err
    assert (out / "seed-0" / "checkpoints").is_dir() and not (out / "seed-0" / "summary.json").exists()


def test_without_a_config_the_default_job_is_trained(tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(learning.subprocess, "run", lambda command, **kwargs: commands.append(command))
    learning.train(None, 3, 1, ["optim.lr=1e-5"], tmp_path)
    learning.train("configs/addition.yaml", 3, 1, [], tmp_path)
    default, given = commands
    assert default[1:4] == ["-m", "rlvr", "train"] and "--config" not in default  # `rlvr train`: the default job
    assert default[default.index("--output-dir") + 1] == str(tmp_path / "seed-3") and default[-1] == "optim.lr=1e-5"
    assert given[4:6] == ["--config", "configs/addition.yaml"]


def test_controls_beside_the_seeds(tmp_path):
    """`--control random`: each seed beside its control run (rlvr train --control, the same seed), the control's
    accuracy after training and the run's paired gain over it in the table."""
    sets = ["model.name=tiny", "data.train_size=32", "data.eval_size=6", "sampling.group_size=4",
            "sampling.batch_size=8", "generation.max_new_tokens=8", "sample_every=0", DIGITS]
    runs = [learning.train(None, 0, 1, [*sets, "max_steps=2"], tmp_path, control) for control in (None, "random")]
    assert runs[1] == tmp_path / "control-random" / "seed-0"
    assert json.loads((runs[1] / "summary.json").read_text())["control"]["kind"] == "random"
    row = learning.against_control(learning.per_run(learning.read_run(runs[0])), *runs)
    assert row["over_control"] == pytest.approx(row["after"] - row["control"])
    assert row["over_control_low"] <= row["over_control"] <= row["over_control_high"]
    text = learning.table([row])
    assert "gain over the control [95%]" in text.splitlines()[0]
