"""The command line end to end, as a user runs it (subprocesses, the shipped configs/tiny.yaml)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def rlvr(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "rlvr", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_train_tiny_config_end_to_end_and_resume(tmp_path):
    run = tmp_path / "run"
    out = rlvr("train", "--config", "configs/tiny.yaml", "--output-dir", str(run))
    assert out.returncode == 0, out.stderr
    assert "before" in out.stdout and "after" in out.stdout and "gain" in out.stdout
    # the task's prompts show an example exchange: the questions alone get their own before, after and gain
    alone = out.stdout.split("the question alone, without the example exchange:")[1].splitlines()
    assert [line.split()[0] for line in alone[1:4]] == ["before", "after", "gain"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 4 and summary["model"] == "tiny"
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 4
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000002", "step-000004"]

    again = rlvr("train", "--config", "configs/tiny.yaml", "--output-dir", str(run))
    assert again.returncode == 2 and "--resume" in again.stderr

    more = rlvr("train", "--resume", str(run), "--max-steps", "6")
    assert more.returncode == 0, more.stderr
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4, 5, 6]
    assert "max_steps: 6" in (run / "config.yaml").read_text()


def test_a_missing_data_file_or_model_folder_is_said_before_torch_loads(tmp_path):
    """A second, not the imports of torch and the models (5-7 s on 2 cores)."""
    said = "import sys; from rlvr.cli import main; code = main(sys.argv[1:]); print(code, 'torch' in sys.modules)"
    for args, message in ((["--set", "data.train=missing.jsonl"], "data source 'missing.jsonl' does not exist"),
                          (["--set", "data.eval=nowhere/held.jsonl"], "data source 'nowhere/held.jsonl' does not"),
                          (["--set", "model.name=./no/such/model"], "model path not found: ./no/such/model")):
        out = subprocess.run([sys.executable, "-c", said, "train", "--output-dir", str(tmp_path / "r"), *args],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert out.stdout.split() == ["2", "False"] and message in out.stderr, (out.stdout, out.stderr)


def test_evals_and_samples_missing_file_or_model_and_a_misspelt_benchmark_are_said_before_torch_loads(tmp_path):
    cases = [(["eval", "--data", "no/such.jsonl"], "data file not found: no/such.jsonl (give a .jsonl/.parquet"),
             (["sample", "--data", "missing.parquet"], "data file not found: missing.parquet"),
             (["eval", "--model", "./no/such/model"], "model path not found: ./no/such/model"),
             (["eval", "--data", "gsm9k"], "unknown benchmark 'gsm9k' (did you mean 'gsm8k'?): use one of gsm8k,"),
             (["sample", "--data", "aritmetic"], "unknown benchmark 'aritmetic' (did you mean 'arithmetic'?)")]
    said = ("import json, sys; from rlvr.cli import main\n"
            "for args in json.loads(sys.argv[1]): print(main(args), file=sys.stderr)\n"
            "print('torch' in sys.modules)")
    runs = [[*args, "--output-dir", str(tmp_path / "out")] for args, _ in cases]
    out = subprocess.run([sys.executable, "-c", said, json.dumps(runs)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    lines = out.stderr.strip().splitlines()
    assert out.stdout.split() == ["False"] and lines[1::2] == ["2"] * len(cases), out.stderr
    assert all(message in line for (_, message), line in zip(cases, lines[::2])), lines


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "sampling.grup_size=4"], "did you mean 'sampling.group_size'"),
        (["--set", "sampling.batch_size=10"], "not divisible by sampling.group_size"),
        (["--config", "does/not/exist.yaml"], "config file not found"),
        (["--set", "model.name=./no/such/model"], "model path not found"),
        (["--set", "data.train=missing.jsonl"], "missing.jsonl"),
        (["--set", "rewards=[{name: no_such_module:fn}]"], "no_such_module"),
    ],
)
def test_user_mistakes_are_one_line_without_traceback(tmp_path, args, message):
    out = rlvr("train", "--config", "configs/tiny.yaml", "--output-dir", str(tmp_path / "r"), *args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_malformed_dataset_row_names_the_line(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "1+1?", "answer": "2"}\n{"prompt": oops}\n')
    out = rlvr("train", "--config", "configs/tiny.yaml", "--output-dir", str(tmp_path / "r"),
               "--set", f"data.train={data}")
    assert out.returncode == 2 and f"{data}:2" in out.stderr and "Traceback" not in out.stderr


def test_help_lists_the_train_options():
    out = rlvr("train", "--help")
    for flag in ("--config", "--set", "--output-dir", "--max-steps", "--resume"):
        assert flag in out.stdout


def _wait_for_lines(path, n, proc, seconds=120):
    import time

    deadline = time.time() + seconds
    while time.time() < deadline and proc.poll() is None and not (path.is_file() and path.read_text().count("\n") >= n):
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1]


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_saves_a_checkpoint_and_exits_with_the_signals_code(tmp_path, signum):
    """SIGTERM (docker stop, schedulers, kill) is treated as Ctrl-C: with save_every=0 the run is still saved. The
    exit code is 128 + the signal's number (130, 143), so that `rlvr train ... && rlvr eval ...` stops there."""
    import signal

    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "rlvr", "train", "--config", "configs/tiny.yaml",
                             "--output-dir", str(run), "--max-steps", "100000", "--set", "save_every=0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = run / "metrics.jsonl"
    _wait_for_lines(metrics, 2, proc)
    proc.send_signal(getattr(signal, signum))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + getattr(signal, signum), stderr
    steps = len(metrics.read_text().splitlines())
    assert "stopped at step" in stdout + stderr and "Traceback" not in stderr
    assert f"{'Ctrl-C' if signum == 'SIGINT' else 'SIGTERM'}: finishing this step" in stdout + stderr
    checkpoints = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert checkpoints == [f"step-{steps:06d}"]
    more = rlvr("train", "--resume", str(run), "--max-steps", str(steps + 1), "--set", "eval_after=false")
    assert more.returncode == 0, more.stderr
    assert len(metrics.read_text().splitlines()) == steps + 1


@pytest.mark.parametrize("command", ["eval", "sample"])
def test_sigterm_keeps_what_eval_and_sample_finished(tmp_path, command):
    import signal

    out = tmp_path / "out"
    args = [command, "--model", "tiny", "--data", "arithmetic", "--limit", "400", "--samples", "2",
            "--max-new-tokens", "8", "--threads", "1", "--output-dir", str(out)]
    # 400 problems, so that the signal lands while sampling (difficulty 1 holds out only 33, sampled in a second)
    args += ["--output", str(tmp_path / "sft.jsonl")] if command == "sample" else ["--difficulty", "2"]
    proc = subprocess.Popen([sys.executable, "-m", "rlvr", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_lines(out / "samples.jsonl", 1, proc)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in stderr, stderr
    assert f"interrupted; finished {'problems' if command == 'eval' else 'prompts'} are saved in {out}" in stderr
    assert 1 <= (out / "samples.jsonl").read_text().count("\n") < 400


def test_an_interrupt_that_passed_through_eval_leaves_the_exit_code_alone(tmp_path):
    """CPython remembers a KeyboardInterrupt that escaped an eval() of a string even once it is caught (sympy
    parses answers with eval, so a SIGTERM can land there) and at exit `python -m` kills itself with SIGINT;
    rlvr's exit code stands instead, and the judge is named as the user wrote it."""
    (tmp_path / "judge.py").write_text('def judge(completions, **kwargs):\n'
                                       '    return eval("(_ for _ in ()).throw(KeyboardInterrupt)")\n')
    done = rlvr("eval", "--model", "tiny", "--data", "arithmetic", "--limit", "2", "--samples", "1",
                "--max-new-tokens", "4", "--reward", "judge.py:judge", "--output-dir", str(tmp_path / "out"),
                cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "reward function 'judge.py:judge' raised KeyboardInterrupt itself" in done.stderr


def test_sigterm_while_a_reward_hangs_saves_and_exits_cleanly(tmp_path):
    """A user's reward blocked on a dead server: SIGTERM abandons the step, saves the finished ones, exits 143."""
    import os
    import signal

    run, flag = tmp_path / "run", tmp_path / "hang-now"
    reward = f"{ROOT / 'tests' / 'train' / 'reward_fns.py'}:hang_when_told"
    rewards = f"rewards=[{{name: '{reward}', timeout_s: 0, correctness: true}}]"
    proc = subprocess.Popen([sys.executable, "-m", "rlvr", "train", "--config", "configs/tiny.yaml",
                             "--output-dir", str(run), "--max-steps", "100000",
                             "--set", "save_every=0", "--set", rewards],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "RLVR_TEST_HANG": str(flag)})
    metrics = run / "metrics.jsonl"
    _wait_for_lines(metrics, 1, proc)
    flag.touch()
    hanging = tmp_path / "hang-now.hanging"
    _wait_for_lines(hanging, 0, proc)  # a step whose reward now hangs
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    steps = len(metrics.read_text().splitlines())
    assert "abandoning this step (reward function" in stdout + stderr and "stopped at step" in stdout + stderr
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [f"step-{steps:06d}"]


HEAVY = ("torch", "transformers", "numpy")


@pytest.mark.parametrize("args", [
    ["--help"], ["train", "--help"], ["train", "--set", "sampling.grup_size=4"], ["train", "--config", "nope.yaml"],
    ["eval", "--model", "tiny", "--data", "x", "--samples", "-1"], ["rm", "--set", "optim.lr=-1"],
    ["sft", "--set", "bogus=1"], ["sample", "--set", "bogus=1"], ["pipeline", "no/such/recipe.yaml"],
    ["grade", "--grader", "nope", "--input", "x", "--output", "y"], ["dashboard", "--help"],
])
def test_help_and_argument_or_config_errors_answer_before_torch_is_imported(args):
    """Parse first, import after: the answer to a typo does not wait seconds for torch and transformers."""
    script = ("import sys\nfrom rlvr.cli import main\ntry:\n    code = main(sys.argv[1:])\nexcept SystemExit as e:\n"
              "    code = e.code\nprint('loaded:', *sorted(m for m in sys.modules if m in " + repr(HEAVY) + "))\n"
              "sys.exit(code)")
    out = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == (0 if "--help" in args else 2), out.stderr
    assert out.stdout.splitlines()[-1] == "loaded:", out.stdout[-300:]


def test_a_signal_repeated_at_once_is_the_same_request(monkeypatch):
    """`timeout` signals the command and then its process group: the second SIGTERM, raised again, would land
    in the first one's cleanup (a KeyboardInterrupt traceback). A later one is a second request."""
    import signal

    import rlvr.cli

    monkeypatch.setattr(rlvr.cli, "_stopping_since", float("-inf"))
    monkeypatch.setattr(rlvr.cli, "_command_ended", False)  # (as while a command runs)
    with pytest.raises(KeyboardInterrupt):
        rlvr.cli._terminate(signal.SIGTERM, None)
    rlvr.cli._terminate(signal.SIGTERM, None)  # (returns: the same request)
    monkeypatch.setattr(rlvr.cli, "_stopping_since", rlvr.cli._stopping_since - rlvr.cli.REPEAT_S)
    with pytest.raises(KeyboardInterrupt):
        rlvr.cli._terminate(signal.SIGTERM, None)


def test_a_signal_after_the_command_ended_lets_it_say_its_end(monkeypatch, capsys):
    """torchrun sends SIGTERM to the other ranks as one fails: a rank saying its own error then (or restoring
    its handlers) ends with its code and its one line, not a KeyboardInterrupt traceback."""
    import argparse
    import os
    import signal

    import rlvr.cli
    from rlvr.errors import UserError

    def fails(args):
        raise UserError("broken on purpose")

    class SignalledStream:
        def write(self, text):
            os.kill(os.getpid(), signal.SIGTERM)
            return len(text)

        def flush(self):
            pass

    monkeypatch.setattr(rlvr.cli, "_stopping_since", float("-inf"))
    monkeypatch.setattr(rlvr.cli, "COMMANDS", {"x": (None, fails)})
    monkeypatch.setattr(sys, "stderr", SignalledStream())
    assert rlvr.cli._run(argparse.Namespace(command="x")) == 2
    assert signal.getsignal(signal.SIGTERM) is not rlvr.cli._terminate


@pytest.mark.parametrize("ending", ["collective", "user error"])
def test_an_interrupt_during_a_failing_commands_cleanup_reports_the_failure(monkeypatch, capsys, ending):
    """torchrun signals the ranks still running when one fails; a rank unwinding from its own failed collective
    (or its own error) when the SIGTERM lands says that failure, with its code, not "interrupted" (130)."""
    import argparse
    import signal

    import torch.distributed  # noqa: F401  (a rank of many has it loaded)

    import rlvr.cli
    from rlvr.errors import UserError

    failure = (RuntimeError("[gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4242")
               if ending == "collective" else UserError("broken on purpose"))

    def fails(args):
        try:
            raise failure
        finally:  # (a cleanup: the sampler closing, say)
            rlvr.cli._terminate(signal.SIGTERM, None)

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(rlvr.cli, "_stopping_since", float("-inf"))
    monkeypatch.setattr(rlvr.cli, "COMMANDS", {"x": (None, fails)})
    code = rlvr.cli._run(argparse.Namespace(command="x"))
    said = capsys.readouterr().err.strip()
    if ending == "collective":
        assert code == 1 and said.startswith("rlvr: error (rank 0): another rank stopped, so this one stops too")
    else:
        assert (code, said) == (2, "rlvr: error (rank 0): broken on purpose")
