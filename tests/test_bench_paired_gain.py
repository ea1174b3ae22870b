"""bench/paired_gain.py: the gain between two evaluations of the same problems, paired problem by problem."""

import importlib.util
from pathlib import Path

import pytest

from rlvr.evaluate.accuracy import paired_gain_interval
from rlvr.evaluate.records import ProblemRecord, SampleRecord
from rlvr.evaluate.store import EvalStore

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("paired_gain", ROOT / "bench" / "paired_gain.py")
paired_gain = importlib.util.module_from_spec(spec)
spec.loader.exec_module(paired_gain)


def evaluation(folder: Path, verdicts: dict[str, tuple[float, float]], reverse: bool = False) -> Path:
    """An eval directory whose greedy answers have these (strict, lenient) verdicts, in id order or reversed."""
    def record(i: int, pid: str) -> ProblemRecord:
        strict, lenient = verdicts[pid]
        greedy = SampleRecord(text="", tokens=1, truncated=False, correct={"strict": strict, "lenient": lenient},
                              answer={"strict": None, "lenient": None})
        return ProblemRecord(id=pid, index=i, prompt="", gold=None, greedy=greedy, samples=[])

    EvalStore(folder).dir.mkdir(parents=True)
    EvalStore(folder).append([record(i, pid) for i, pid in enumerate(sorted(verdicts, reverse=reverse))])
    return folder


def test_the_gain_pairs_problems_by_id_in_each_mode(tmp_path):
    before = {"a": (1.0, 1.0), "b": (0.0, 1.0), "c": (0.0, 0.0), "d": (0.0, 0.0)}
    after = {"a": (1.0, 1.0), "b": (1.0, 1.0), "c": (0.0, 1.0), "d": (0.0, 0.0)}
    r = paired_gain.row(evaluation(tmp_path / "b", before), evaluation(tmp_path / "a", after, reverse=True))
    assert r["strict"]["before"].mean == 0.25 and r["strict"]["after"].mean == 0.5
    assert r["strict"]["gain"] == paired_gain_interval([1, 0, 0, 0], [1, 1, 0, 0])  # ids a, b, c, d
    assert r["lenient"]["gain"] == paired_gain_interval([1, 1, 0, 0], [1, 1, 1, 0])
    # paired in the order written (after reversed) the same means would give another interval
    assert r["strict"]["gain"] != paired_gain_interval([1, 0, 0, 0], [0, 0, 1, 1])


def test_evaluations_of_different_problems_are_refused(tmp_path):
    one = evaluation(tmp_path / "one", {"a": (0.0, 0.0), "b": (1.0, 1.0)})
    other = evaluation(tmp_path / "other", {"a": (0.0, 0.0), "z": (1.0, 1.0)})
    with pytest.raises(SystemExit, match="evaluated different problems"):
        paired_gain.row(one, other)
