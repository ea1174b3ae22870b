"""`rlvr eval` and `rlvr sample` on 2 ranks write what one process writes, byte for byte: each chunk of
problems is sampled with its own seed, whichever rank samples it, and rank 0 writes them in order."""

import sys

import pytest

from .launching import run_ranks

COMMON = ["--model", "tiny", "--data", "arithmetic", "--limit", "12", "--samples", "2", "--max-new-tokens", "8",
          "--set", "batch_size=4"]


@pytest.mark.parametrize("command", ["eval", "sample"])
def test_two_ranks_write_what_one_process_writes(tmp_path, command):
    outputs = []
    for nproc in (1, 2):
        out = tmp_path / f"{nproc}proc"
        extra = ["--output", str(out / "sft.jsonl")] if command == "sample" else []
        done = run_ranks([sys.executable, "-m", "rlvr", command, *COMMON, *extra, "--output-dir", str(out),
                               "--nproc", str(nproc)], timeout=180)
        assert done.returncode == 0, done.stderr[-4000:]
        outputs.append((out, done.stdout))
    (one, _), (two, stdout) = outputs
    assert (two / "samples.jsonl").read_bytes() == (one / "samples.jsonl").read_bytes()
    assert (two / "samples.jsonl").read_text().count("\n") == 12
    if command == "eval":
        assert (two / "summary.json").read_text() == (one / "summary.json").read_text()
        assert stdout.count("results:") == 1  # rank 0 reports
    else:
        assert (two / "sft.jsonl").read_bytes() == (one / "sft.jsonl").read_bytes()
        assert stdout.count("SFT dataset:") == 1
