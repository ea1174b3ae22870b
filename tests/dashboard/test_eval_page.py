"""`rlvr report` on an rlvr eval folder renders that evaluation; on a folder that is neither a run nor an
evaluation it says so in one line."""

import json

import pytest

from rlvr.cli import main


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval")
    rows = [{"question": f"What is {a} + 1? <b>bold</b>", "answer": str(a + 1)} for a in range(4)]
    (folder / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["eval", "--model", "tiny", "--data", str(folder / "m.jsonl"), "--samples", "2", "--max-new-tokens",
                 "8", "--threads", "1", "--output-dir", str(folder / "out")]) == 0
    return folder / "out"


def test_an_eval_folder_renders_its_results_curves_settings_and_problems(evaluated, capsys):
    assert main(["report", str(evaluated)]) == 0
    page = (evaluated / "report.html").read_text()
    summary = json.loads((evaluated / "summary.json").read_text())
    assert "greedy pass@1" in page and "pass@2" in page and "data:image/png;base64," in page
    assert f"{100 * summary['strict']['pass@1']['mean']:.1f}%" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page  # the data's text is escaped
    assert "verifier_version" in page and "no metrics.jsonl" not in page


def test_an_unfinished_evaluation_and_a_foreign_folder_are_one_line(evaluated, tmp_path, capsys):
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "settings.json").write_text((evaluated / "settings.json").read_text())
    assert main(["report", str(unfinished)]) == 2
    assert "has not finished" in capsys.readouterr().err
    # a finished one run again with a higher limit, stopped half-way: its summary.json is of the earlier one
    import shutil

    grown = tmp_path / "grown"
    shutil.copytree(evaluated, grown)
    settings = json.loads((grown / "settings.json").read_text())
    (grown / "settings.json").write_text(json.dumps({**settings, "limit": 9}))
    with (grown / "samples.jsonl").open("a") as f:
        f.write((evaluated / "samples.jsonl").read_text().splitlines()[0] + "\n")
    assert main(["report", str(grown)]) == 2
    assert ("has not finished (5 problems sampled; its summary.json is of an earlier one, 4 problems)"
            in capsys.readouterr().err)
    (grown / "sample_summary.json").write_text("{}")  # what rlvr sample writes: no eval to finish
    assert main(["report", str(grown)]) == 2
    assert "is what rlvr sample wrote" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "neither a run directory" in error
    assert main(["report", str(evaluated), str(evaluated)]) == 2
