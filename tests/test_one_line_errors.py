"""A user's mistake in a file or the machine is one line naming the cause and the fix, never a traceback."""

import errno
import io
from pathlib import Path

import pytest

from rlvr.cli import main

TRAIN = ["train", "--set", "model.name=tiny", "--set", "data.train_size=4", "--set", "eval_before=false",
         "--max-steps", "1", "--output-dir", "{t}/run"]


def files(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"prompt": "1+1?", "answer": "2"}\n'
                                            b'{"prompt": "caf\xe9", "answer": "2"}\n')
    (tmp_path / "latin1-first.jsonl").write_bytes(b'{"question": "caf\xe9", "answer": "2"}\n')
    (tmp_path / "maths.jsonl").write_text('{"prompt": "What is 1 + 1?", "answer": "2"}\n')
    (tmp_path / "fake.parquet").write_text("not parquet")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.txt").write_text("not a model")
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + bytes(range(256)) * 8)
    (tmp_path / "pairs.jsonl").write_bytes(b'{"prompt": "p", "chosen": "\xff", "rejected": "b"}\n')
    (tmp_path / "grader.yaml").write_text("type: regex\npattern: [a\nflags: 1\n")
    (tmp_path / "rows.jsonl").write_text('{"completion": "a"}\n')
    (tmp_path / "folder.jsonl").mkdir()
    (tmp_path / "throws.py").write_text("def boom(completions, **kwargs):\n    raise RuntimeError('judge down')\n")
    (tmp_path / "twice.yaml").write_text("algorithm:\n  beta: 0.5\nseed: 1\nalgorithm:\n  policy_loss: gspo\n")


CASES = {
    "a section given twice": ([*TRAIN, "--config", "{t}/twice.yaml"],
                              "config file {t}/twice.yaml: key 'algorithm' is given twice (lines 1 and 4)"),
    "empty data file": ([*TRAIN, "--set", "data.train={t}/empty.jsonl"],
                        "data source '{t}/empty.jsonl' has no rows"),
    "non-UTF-8 byte": ([*TRAIN, "--set", "data.train={t}/latin1.jsonl"],
                       "{t}/latin1.jsonl:2: byte 0xe9 at column 16 is not UTF-8; save the file as UTF-8"),
    "not Parquet": ([*TRAIN, "--set", "data.train={t}/fake.parquet"],
                    "{t}/fake.parquet is not a readable Parquet file"),
    "not a model": ([*TRAIN, "--set", "model.name={t}/notes"], "{t}/notes is not a model directory: it has no config"),
    "corrupt gguf": ([*TRAIN, "--set", "model.name={t}/broken.gguf", "--set", "model.cache_dir={t}/cache"],
                     "could not load {t}/broken.gguf as a GGUF model"),
    "--output-dir with --resume": (["train", "--resume", "{t}", "--output-dir", "{t}/other"],
                                   "--resume continues a run with its own config and directory"),
    "eval on an empty file": (["eval", "--model", "tiny", "--data", "{t}/empty.jsonl", "--output-dir", "{t}/e"],
                              "data source '{t}/empty.jsonl' has no rows"),
    "eval on a non-UTF-8 byte": (["eval", "--model", "tiny", "--data", "{t}/latin1.jsonl", "--output-dir", "{t}/e"],
                                 "{t}/latin1.jsonl:2: byte 0xe9 at column 16 is not UTF-8; save the file as UTF-8"),
    "eval on a non-UTF-8 first line": (["eval", "--model", "tiny", "--data", "{t}/latin1-first.jsonl",
                                        "--output-dir", "{t}/e"],
                                       "{t}/latin1-first.jsonl:1: byte 0xe9 at column 18 is not UTF-8"),
    "eval with no room left for the prompt": (
        ["eval", "--model", "tiny", "--data", "{t}/maths.jsonl", "--output-dir", "{t}/e"],
        "over the limit of 1 (the model's context of 1024 tokens less the completion budget of 1024 new tokens, the "
        "default for maths): shorten or drop those rows, or lower the completion budget with --max-new-tokens "
        "(generation.max_new_tokens)"),
    "grader YAML": (["grade", "--grader", "{t}/grader.yaml", "--input", "{t}/rows.jsonl", "--output", "{t}/o.jsonl"],
                    "grader spec {t}/grader.yaml, line 3 column 6, is not valid YAML"),
    "a folder named as a data file": ([*TRAIN, "--set", "data.train={t}/folder.jsonl"],
                                      "Is a directory: {t}/folder.jsonl (a folder stands where a file is wanted: "
                                      "give a file's path)"),
    "--output-dir is a file": ([*TRAIN[:-1], "{t}/rows.jsonl"],
                               "File exists: {t}/rows.jsonl (a file stands where a folder is wanted"),
    "--output-dir under a file": (["eval", "--model", "tiny", "--data", "{t}/maths.jsonl", "--output-dir",
                                   "{t}/rows.jsonl/e"], "Not a directory: {t}/rows.jsonl/e"),
    "sample --output a folder": (["sample", "--model", "tiny", "--data", "arithmetic", "--output", "{t}/notes",
                                  "--output-dir", "{t}/s"], "--output {t}/notes is a folder: give the SFT dataset's"),
    "a grader that raises on every row": (["grade", "--grader", "{t}/throws.py:boom", "--input", "{t}/rows.jsonl",
                                           "--output", "{t}/o.jsonl"],
                                          "grader 'boom' failed on every row, so the scores mean nothing (first, "
                                          "line 1: reward function 'boom' raised RuntimeError: judge down"),
    "--config a folder": ([*TRAIN, "--config", "{t}/notes"], "config file {t}/notes is a folder: give a YAML file"),
    "--resume a file": (["train", "--resume", "{t}/rows.jsonl"], "cannot resume: {t}/rows.jsonl is a file"),
    "grade --input a folder": (["grade", "--grader", "math", "--input", "{t}/notes", "--output", "{t}/o.jsonl"],
                               "--input {t}/notes is a folder: give a JSONL file"),
    "non-UTF-8 pairs": (["rm", "--set", "data={t}/pairs.jsonl", "--set", "model=tiny", "--output-dir", "{t}/rm"],
                        "{t}/pairs.jsonl:1: byte 0xff"),
}


@pytest.mark.parametrize("case", CASES)
def test_one_line_with_the_cause(tmp_path, capsys, case):
    files(tmp_path)
    args, message = CASES[case]
    code = main([a.format(t=tmp_path) for a in args])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("rlvr")]
    assert len(lines) == 1 and message.format(t=tmp_path) in lines[0], err
    assert not (tmp_path / "run").exists()  # a run that could not start leaves nothing behind


@pytest.mark.parametrize("command", [["dashboard", "runs/x"], ["serve", "--tinker"]])
@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_an_argument_error(capsys, command, port):
    with pytest.raises(SystemExit) as exited:
        main([*command, "--port", port])
    assert exited.value.code == 2
    assert f"argument --port: {int(port)} is not a port: give 0 to 65535" in capsys.readouterr().err


def test_the_dashboard_on_a_port_in_use(tmp_path, capsys):
    from rlvr.dashboard.server import make_server

    taken = make_server([], port=0)
    try:
        code = main(["dashboard", str(tmp_path), "--port", str(taken.server_address[1])])
    finally:
        taken.server_close()
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Address already in use; pass another --port" in err



class FullDisk(io.TextIOWrapper):
    """A file on a disk with no space left: it opens, but nothing written reaches it."""

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("full", [".rlvr.lock", "config.yaml", "metrics.jsonl"])
def test_a_disk_full_at_the_start_of_a_run(tmp_path, capsys, monkeypatch, full):
    """The disk fills at each file a run writes before its first checkpoint: one line naming the folder."""
    real_open = Path.open

    def open_on_a_full_disk(path, mode="r", *args, **kwargs):
        if path.name != full or not set(mode) & set("wax+"):
            return real_open(path, mode, *args, **kwargs)
        return FullDisk(real_open(path, mode.replace("t", "") + ("b" if "b" not in mode else "")), encoding="utf-8")

    monkeypatch.setattr(Path, "open", open_on_a_full_disk)
    code = main([a.format(t=tmp_path) for a in TRAIN])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    said_at_start = ("rlvr: precision", "rlvr: memory plan")  # (once every check has passed: metrics come later)
    lines = [line for line in err.splitlines() if line.startswith("rlvr") and not line.startswith(said_at_start)]
    assert lines == [f"rlvr: error: no space left on the disk of {tmp_path}/run: free some space and start it again"]


def test_a_disk_full_before_the_run_starts(small_disk, capsys):
    """A real full disk (a tmpfs filled up, where one can be mounted): the lock's pid cannot be written."""
    with open(small_disk / "filler", "wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC
    code = main([a.format(t=small_disk) for a in TRAIN])
    err = capsys.readouterr().err
    assert code == 2 and err == f"rlvr: error: no space left on the disk of {small_disk}/run: free some space and " \
                                "start it again\n"
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]  # the run's folder is removed again


def test_a_disk_full_after_a_checkpoint_says_to_resume(tmp_path):
    from rlvr.errors import UserError
    from rlvr.run.lock import run_lock

    (tmp_path / "checkpoints" / "step-000002").mkdir(parents=True)
    with pytest.raises(UserError) as e, run_lock(tmp_path):
        raise OSError(errno.ENOSPC, "No space left on device")  # metrics.jsonl at step 3, say
    assert str(e.value) == (f"no space left on the disk of {tmp_path}: free some space and continue with "
                            f"--resume {tmp_path}")


@pytest.mark.parametrize("command", [
    [*TRAIN, "--set", "environment.name=python_tool"],
    ["eval", "--model", "tiny", "--data", "arithmetic", "--limit", "1", "--samples", "1", "--no-greedy",
     "--set", "environment.name=python_tool", "--output-dir", "{t}/e"],
], ids=["train", "eval"])
def test_the_python_tool_without_a_sandbox_is_refused_before_any_step(tmp_path, capsys, monkeypatch, command):
    """Refused when the run is built, as code rewards are, not at the first tool call (which a tiny random
    model never makes: the run would finish without a sandbox ever being asked for)."""
    from rlvr.sandbox import command as sandbox

    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    monkeypatch.delenv(sandbox.ISOLATION_ENV, raising=False)
    code = main([a.format(t=tmp_path) for a in command])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("rlvr")]
    assert len(lines) == 1 and "rlvr: error: running model-written code needs a sandbox, and bubblewrap (bwrap) " \
                               "is not installed" in lines[0] and "RLVR_SANDBOX=unisolated" in lines[0], err


def test_a_read_only_run_directory_is_one_line(tmp_path, monkeypatch):
    """A folder the process cannot write (a read-only mount: EROFS) is said at the lock, before anything runs."""
    from rlvr.errors import UserError
    from rlvr.run.lock import run_lock

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(self))
    monkeypatch.setattr(Path, "open", read_only)
    with pytest.raises(UserError) as e, run_lock(tmp_path / "run"):
        pass
    assert str(e.value) == (f"cannot write the run directory {tmp_path / 'run'}: Read-only file system; give a "
                            "writable --output-dir")


def test_bytes_appended_to_the_logs_are_dropped_at_resume(tmp_path):
    """Random bytes after metrics.jsonl's lines (not UTF-8) are no step's line: the resume keeps the steps'."""
    from rlvr.run.metrics import truncate_jsonl

    log = tmp_path / "metrics.jsonl"
    log.write_bytes(b'{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n' + bytes(range(128, 256)) + b"\n\xff\xfe")
    truncate_jsonl(log, 1)
    assert log.read_text() == '{"step": 1, "loss": 0.5}\n'
