"""`rlvr sample` through the command line (rlvr.cli.main) on the tiny model, and its one-line errors."""

import json

from rlvr.cli import main
from rlvr.evaluate.benchmarks import load_benchmark
from rlvr.evaluate.store import EvalStore


def test_cli_samples_a_built_in_task_from_its_train_split(tmp_path, capsys):
    out, data = tmp_path / "work", tmp_path / "sft.jsonl"
    (tmp_path / "sample.yaml").write_text("samples: 2\nmax_new_tokens: 8\nthreads: 1\n")
    code = main(["sample", "--model", "tiny", "--data", "arithmetic", "--limit", "3",
                 "--config", str(tmp_path / "sample.yaml"),
                 "--set", "verdict=lenient", "--max-per-prompt", "1", "--output-dir", str(out), "--output", str(data)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "kept" in printed and str(data) in printed
    summary = json.loads((out / "sample_summary.json").read_text())
    assert summary["problems"] == 3 and summary["samples"] == 6
    assert summary["kept"] + sum(summary["dropped"].values()) == 6
    assert (summary["settings"]["filters"]["verdict"] == "lenient"
            and summary["settings"]["filters"]["max_per_prompt"] == 1)
    assert "train split" in summary["settings"]["sampling"]["origin"]
    train, test = (load_benchmark("arithmetic", limit=3, split=split).examples for split in ("train", "test"))
    assert [ex.prompt for ex in train] != [ex.prompt for ex in test]
    assert all(ex.prompt in r.prompt for ex, r in zip(train, EvalStore(out).read(), strict=True))
    assert len(data.read_text().splitlines()) == summary["kept"]  # a random model: most likely none


def test_cli_mistakes_are_one_line_and_exit_2(tmp_path, capsys):
    for args, message in [
        (["--data", "gsm8k"], "gsm8k is an evaluation benchmark"),
        (["--set", "verdit=strict"], "did you mean 'verdict'"),
        (["--data", str(tmp_path / "missing.jsonl")], "data file not found"),
    ]:
        assert main(["sample", "--model", "tiny", "--threads", "1", "--output-dir", str(tmp_path), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and err.count("\n") == 0, err
