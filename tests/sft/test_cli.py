"""`rlvr sft` end to end through rlvr.cli.main, as a user runs it."""

import json

import pytest

from rlvr.cli import main
from rlvr.models import load_model

TINY = ["--model", "tiny", "--set", "threads=1", "--set", "tensorboard=false", "--set", "optim.lr=3e-3"]


def test_sft_end_to_end_then_resume(tmp_path, echo_file, capsys):
    config = tmp_path / "sft.yaml"
    config.write_text("batch_size: 8\neval_fraction: 0.25\npacking: true\noptim:\n  schedule: constant\n")
    run = tmp_path / "run"
    code = main(["sft", "--data", str(echo_file), "--config", str(config), *TINY, "--output-dir", str(run),
                 "--max-steps", "4"])
    out = capsys.readouterr().out
    assert code == 0
    assert "held-out loss" in out and f"rlvr train --set model.name={run}" in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 4 and summary["model"] == "tiny" and summary["packing"] is True
    assert summary["after"]["loss"] < summary["before"]["loss"]
    written = (run / "config.yaml").read_text()
    assert "lr: 0.003" in written and "max_steps: 4" in written and "packing: true" in written

    again = main(["sft", "--data", str(echo_file), *TINY, "--output-dir", str(run)])
    assert again == 2 and "--resume" in capsys.readouterr().err

    assert main(["sft", "--resume", str(run), "--max-steps", "6"]) == 0
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4, 5, 6]
    assert "max_steps: 6" in (run / "config.yaml").read_text()
    load_model(str(run))  # the run directory is a model name


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give --data"),
        (["--data", "missing.jsonl"], "SFT data not found: missing.jsonl"),
        (["--data", "ROWS", "--set", "eval_fracton=0.2"], "did you mean 'eval_fraction'"),
        (["--data", "ROWS", "--set", "optim.lr=fast"], "'optim.lr' must be float"),
        (["--data", "ROWS", "--model", "./no/such/model"], "model path not found"),
        (["--data", "BAD"], ":2: no 'completion' field"),
        (["--resume", "RUN"], "no complete checkpoint"),
    ],
)
def test_user_mistakes_exit_2_with_one_line(tmp_path, echo_file, capsys, args, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p", "completion": "c"}\n{"prompt": "p", "answer": "4"}\n')
    swap = {"ROWS": str(echo_file), "BAD": str(bad), "RUN": str(tmp_path / "run")}
    args = [swap.get(a, a) for a in args]
    extra = [] if "--resume" in args else ["--output-dir", str(tmp_path / "run")]
    code = main(["sft", *args, *extra, "--set", "threads=1"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()
