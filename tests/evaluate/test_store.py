"""The evaluation directory: crash-safe appends, resuming, and refusing mixed settings."""

import json

import pytest

from rlvr.errors import UserError
from rlvr.evaluate.records import ProblemRecord, SampleRecord
from rlvr.evaluate.store import EvalStore


def record(i):
    s = SampleRecord(text=f"<script>{i}</script>", tokens=3, truncated=False, correct={"strict": 1.0, "lenient": None},
                     answer={"strict": "1", "lenient": None}, budget_correct={"strict": [1.0], "lenient": [None]},
                     score=0.5)
    return ProblemRecord(id=f"p{i}", index=i, prompt="q", gold="1", greedy=None, samples=[s])


def test_records_round_trip_and_a_torn_last_line_is_cut_off(tmp_path):
    store = EvalStore(tmp_path)
    assert store.open({"seed": 0}) == {}
    store.append([record(0), record(1)])
    with store.samples_path.open("a") as f:
        f.write('{"id": "p2", "ind')  # the process died here
    done = EvalStore(tmp_path).open({"seed": 0})
    assert list(done) == ["p0", "p1"] and done["p1"] == record(1)
    assert store.samples_path.read_text().endswith("\n")  # truncated back to the last whole record
    store.append([record(2)])
    assert [r.id for r in store.read()] == ["p0", "p1", "p2"]


def test_other_settings_are_refused_with_the_key_named(tmp_path):
    store = EvalStore(tmp_path)
    store.open({"seed": 0, "temperature": 0.6, "limit": 2})
    store.append([record(0)])
    EvalStore(tmp_path).open({"seed": 0, "temperature": 0.6, "limit": 10})  # a longer run resumes
    with pytest.raises(UserError, match=r"temperature: 0\.6 there, 0\.7 now.*another --output-dir"):
        EvalStore(tmp_path).open({"seed": 0, "temperature": 0.7, "limit": 2})


def test_a_corrupt_whole_line_is_a_user_error(tmp_path):
    store = EvalStore(tmp_path)
    store.open({})
    store.samples_path.write_text('{"not": "a record"}\n')
    with pytest.raises(UserError, match="corrupt record"):
        store.read()


def test_settings_are_written_atomically(tmp_path):
    EvalStore(tmp_path).open({"seed": 3})
    assert json.loads((tmp_path / "settings.json").read_text()) == {"seed": 3}
    assert not list(tmp_path.glob(".*.tmp"))


def test_settings_without_any_result_do_not_bind(tmp_path):
    EvalStore(tmp_path).open({"model": "typo"})  # e.g. the model then failed to load
    EvalStore(tmp_path).open({"model": "fixed"})
    assert json.loads((tmp_path / "settings.json").read_text()) == {"model": "fixed"}


@pytest.mark.parametrize("held", ["checkpoints", "config.yaml"])
def test_a_training_runs_directory_is_refused_before_anything_is_written(tmp_path, held):
    """`rlvr eval --output-dir RUN` replaced the run's summary.json (its before/after accuracy) without a word."""
    (tmp_path / "checkpoints").mkdir() if held == "checkpoints" else (tmp_path / held).write_text("seed: 0\n")
    (tmp_path / "summary.json").write_text('{"after": 0.5}')
    with pytest.raises(UserError, match=rf"{tmp_path} is a training run's directory .*give another --output-dir"):
        EvalStore(tmp_path).open({"seed": 0})
    assert (tmp_path / "summary.json").read_text() == '{"after": 0.5}' and not (tmp_path / "settings.json").exists()
