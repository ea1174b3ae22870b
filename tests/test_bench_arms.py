"""bench/arms.py: controlled runs, every arm over the same seeds, compared with the baseline seed by seed."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.config import save_config

from .test_bench_learning import ctrl_c_after
from .train.test_step import DIGITS, tiny_config

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("arms", ROOT / "bench" / "arms.py")
arms = importlib.util.module_from_spec(spec)
spec.loader.exec_module(arms)


def test_an_arm_is_a_name_and_its_changes():
    assert arms.parse_arm("constant") == ("constant", [])
    assert arms.parse_arm("g16:sampling.group_size=16, sampling.batch_size=128") == (
        "g16", ["sampling.group_size=16", "sampling.batch_size=128"])
    with pytest.raises(SystemExit, match="arm name"):
        arms.parse_arm("lr 1e-5:optim.lr=1e-5")
    with pytest.raises(SystemExit, match="not KEY=VALUE"):
        arms.parse_arm("lr:optim.lr")


def test_every_arm_runs_a_seed_before_any_arm_runs_the_next():
    order = arms.jobs([("a", []), ("b", ["x=1"])], [0, 1])
    assert [(name, seed) for name, _, seed in order] == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]


def row(seed, after, holds=True):
    return {"seed": seed, "after": after, "peak": after + 0.02, "gain": after - 0.3, "holds": holds}


def test_arms_are_compared_with_the_baseline_on_the_seeds_both_finished():
    table = arms.compare({"base": [row(0, 0.60), row(1, 0.50, holds=False)],
                          "lower": [row(1, 0.58), row(2, 0.90)]}, "base")
    base, lower = table
    assert base["vs_baseline"] == {} and base["holds"] == 1 and base["after"]["mean"] == pytest.approx(0.55)
    assert lower["vs_baseline"] == {1: pytest.approx(0.08)}  # seed 2 has no baseline run, seed 0 no arm run
    assert lower["vs_baseline_mean"] == pytest.approx(0.08) and lower["holds"] == 2
    assert "+8.0 (seed 1)" in arms.markdown(table, {"lower": ["optim.lr=1e-5"]}, "base")


def test_arms_trained_and_reported(tmp_path):
    config = tmp_path / "tiny.yaml"
    save_config(tiny_config(tmp_path, DIGITS, "eval_every=1", steps=2), config)
    out = tmp_path / "study"
    command = [sys.executable, str(ROOT / "bench" / "arms.py"), "--config", str(config), "--seeds", "0",
               "--parallel", "1", "--out", str(out),
               "--arm", "base", "--arm", "same:", "--arm", "broken:optim.lr=-1", "--arm", "hot:optim.lr=0.05"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "broken seed 0 failed" in done.stdout  # a failed run is named and the others go on
    table = {t["arm"]: t for t in json.loads((out / "arms.json").read_text())["table"]}
    assert list(table) == ["base", "same", "hot"]
    assert table["same"]["vs_baseline"] == {"0": 0.0}  # one thread: an arm that changes nothing is the baseline
    assert (out / "arms.png").stat().st_size > 0
    report = subprocess.run([sys.executable, str(ROOT / "bench" / "arms.py"), "--report", str(out)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert report.returncode == 0, report.stderr
    assert "| hot | optim.lr=0.05 | 0 |" in report.stdout
    versus = subprocess.run([sys.executable, str(ROOT / "bench" / "arms.py"), "--report", str(out), "--baseline",
                             "broken"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert versus.returncode == 1 and "no finished run of the baseline arm 'broken'" in versus.stderr


def test_what_a_study_cannot_run_is_one_line(tmp_path):
    def run(*args):
        done = subprocess.run([sys.executable, str(ROOT / "bench" / "arms.py"), *args], capture_output=True,
                              text=True, timeout=120, cwd=ROOT)
        return done.returncode, done.stderr.strip()

    assert run("--report", str(tmp_path / "nowhere")) == (1, f"bench/arms.py: no folder {tmp_path / 'nowhere'} "
                                                                "(give the --out of a study)")
    code, err = run("--config", "c.yaml", "--arm", "a", "--arm", "a:optim.lr=1", "--out", str(tmp_path / "s"))
    assert code == 1 and err == "bench/arms.py: two arms have the same name (each names its folder)"
    assert not (tmp_path / "s").exists()  # nothing written for a study that cannot run


def test_a_study_stopped_by_ctrl_c_goes_on_where_it_stopped(tmp_path):
    config = tmp_path / "tiny.yaml"
    save_config(tiny_config(tmp_path, DIGITS, "eval_every=1", steps=12), config)  # (10 steps' margin for the Ctrl-C)

    def study(out, *names, stop_after_steps=None):
        command = [sys.executable, str(ROOT / "bench" / "arms.py"), "--config", str(config), "--seeds", "0",
                   "--parallel", "1", "--set", "threads=1", "--out", str(out), *[f"--arm={n}" for n in names]]
        if stop_after_steps is None:
            return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
        return ctrl_c_after(command, out / "a" / "seed-0" / "metrics.jsonl", stop_after_steps)

    out = tmp_path / "study"
    code, err = study(out, "a", "b:optim.lr=0.05", stop_after_steps=2)
    assert code == 1 and err.startswith("bench/arms.py: interrupted;") and "\n" not in err
    assert (out / "a" / "seed-0" / "checkpoints").is_dir() and not (out / "a" / "seed-0" / "summary.json").exists()
    assert not (out / "b").exists()  # the queued arm never started
    again = study(out, "a", "b:optim.lr=0.05")
    assert again.returncode == 0, again.stderr
    assert [t["arm"] for t in json.loads((out / "arms.json").read_text())["table"]] == ["a", "b"]
    log = (out / "a" / "seed-0.log").read_text()
    assert "step 1:" not in log and "step 12:" in log  # taken up at its checkpoint, not trained again
    unbroken = study(tmp_path / "unbroken", "a")
    assert unbroken.returncode == 0, unbroken.stderr

    def curve(study_dir):
        rows = [json.loads(line) for line in (study_dir / "a" / "seed-0" / "metrics.jsonl").read_text().splitlines()]
        return [(m["step"], m["loss"], m["reward/mean"], m["eval/strict"]) for m in rows]

    assert len(curve(out)) == 12 and curve(out) == curve(tmp_path / "unbroken")  # resumed = never stopped
