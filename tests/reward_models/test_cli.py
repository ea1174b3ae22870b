"""`rlvr rm` end to end through rlvr.cli.main, as a user runs it."""

import json

import pytest

from rlvr.cli import main
from rlvr.models.reward_model import STATS_FILE


def test_rm_end_to_end(tmp_path, pairs_file, capsys):
    config = tmp_path / "rm.yaml"
    config.write_text("batch_size: 8\nlr: 1.0e-3\nthreads: 1\n")
    run = tmp_path / "run"
    code = main(["rm", "--data", str(pairs_file), "--model", "tiny", "--config", str(config),
                 "--set", "eval_fraction=0.25", "--output-dir", str(run), "--max-steps", "12"])
    out = capsys.readouterr().out
    assert code == 0
    assert "held-out pairwise accuracy" in out and "name: reward_model" in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 12 and summary["model"] == "tiny"
    assert summary["after"]["pairwise_accuracy"]["mean"] > summary["before"]["pairwise_accuracy"]["mean"]
    assert (run / "checkpoints" / "step-000012" / "model" / STATS_FILE).is_file()
    written = (run / "config.yaml").read_text()
    assert "lr: 0.001" in written and "eval_fraction: 0.25" in written and "max_steps: 12" in written


def test_rm_resumes_from_the_command_line(tmp_path, pairs_file, capsys):
    """rlvr rm --resume continues a run, as rlvr train and rlvr sft do; --config with --resume is refused."""
    run = tmp_path / "run"
    base = ["--set", "threads=1", "--set", "batch_size=8"]
    assert main(["rm", "--data", str(pairs_file), "--model", "tiny", "--output-dir", str(run),
                 "--max-steps", "2", *base]) == 0
    assert main(["rm", "--resume", str(run), "--config", "x.yaml"]) == 2
    assert "drop --config/--output-dir" in capsys.readouterr().err
    assert main(["rm", "--resume", str(run), "--max-steps", "4"]) == 0
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]
    assert json.loads((run / "summary.json").read_text())["steps"] == 4


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give --data"),
        (["--data", "missing.jsonl"], "preference file not found: missing.jsonl"),
        (["--data", "PAIRS", "--set", "eval_fracton=0.2"], "did you mean 'eval_fraction'"),
        (["--data", "PAIRS", "--set", "batch_size=many"], "'batch_size' must be int"),
        (["--data", "PAIRS", "--model", "./no/such/model"], "model path not found"),
    ],
)
def test_user_mistakes_exit_2_with_one_line(tmp_path, pairs_file, capsys, args, message):
    args = [str(pairs_file) if a == "PAIRS" else a for a in args]
    code = main(["rm", *args, "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_malformed_row_names_its_line(tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    data.write_text('{"prompt": "p", "chosen": "a", "rejected": "b"}\n{"prompt": "p", "chosen": "a"}\n')
    assert main(["rm", "--data", str(data), "--model", "tiny", "--output-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"{data}:2: no 'rejected' field" in err and len(err.strip().splitlines()) == 1
