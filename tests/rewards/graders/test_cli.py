"""`rlvr grade` end to end: JSONL in, JSONL out, malformed lines reported by number and skipped."""

import argparse
import json
import subprocess
import sys
import textwrap

import pytest

from rlvr.errors import UserError
from rlvr.rewards.cli import add_grade_parser, run_grade


def grade(tmp_path, grader, lines, capsys):
    """Run `rlvr grade` on `lines`; the output rows, stdout and stderr."""
    source, output = tmp_path / "input.jsonl", tmp_path / "out" / "scored.jsonl"
    source.write_text("\n".join(lines) + "\n")
    parser = argparse.ArgumentParser(prog="rlvr")
    add_grade_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["grade", "--grader", str(grader), "--input", str(source), "--output", str(output),
                              "--batch-size", "2"])
    assert run_grade(args) == 0
    captured = capsys.readouterr()
    return [json.loads(line) for line in output.read_text().splitlines()], captured.out, captured.err


def test_math_with_a_malformed_line_in_the_middle(tmp_path, capsys):
    lines = [
        json.dumps({"completion": r"so \boxed{72}", "answer": "72", "id": 1}),
        json.dumps({"completion": r"\boxed{71}", "answer": "72", "id": 2}),
        '{"completion": "\\\\boxed{3}", "answer": ',  # line 3: cut off
        "",  # a blank line is skipped, but still counts for the numbers after it
        json.dumps({"answer": "5", "id": 5}),  # line 5: no completion
        json.dumps({"completion": [{"role": "assistant", "content": r"\boxed{6}"}], "answer": "6", "id": 6}),
        "[1, 2]",  # line 7: not an object
        json.dumps({"completion": r"\boxed{8}", "id": 8}),  # no answer: not scored, not malformed
    ]
    rows, out, err = grade(tmp_path, "math", lines, capsys)
    source = tmp_path / "input.jsonl"
    assert err.splitlines() == [
        f"{source}:3: invalid JSON (Expecting value at column 39)",
        f"{source}:5: no 'completion' field (add the text to grade as 'completion')",
        f"{source}:7: a JSON list, not an object",
    ]
    assert [row["reward"] for row in rows] == [1.0, 0.0, None, None, 1.0, None, None]
    assert rows[0] == {"completion": r"so \boxed{72}", "answer": "72", "id": 1, "reward": 1.0,
                       "reason": "answer '72' matches"}
    assert rows[2] == {"line": 3, "reward": None, "reason": "invalid JSON (Expecting value at column 39)"}
    assert rows[3]["id"] == 5 and rows[3]["reason"].startswith("no 'completion'")
    assert rows[6]["reason"] == "the row has no 'answer'"
    assert "graded 7 rows" in out and "3 scored, 4 skipped (null; 3 malformed)" in out
    assert "mean reward 0.6667" in out and "with 'math' in" in out


def test_countdown(tmp_path, capsys):
    lines = [
        json.dumps({"completion": "<answer>8/(3-8/3)</answer>", "numbers": [3, 3, 8, 8], "target": 24}),
        "not json at all",
        json.dumps({"completion": "<answer>8*3</answer>", "numbers": [3, 3, 8, 8], "target": 24}),
    ]
    rows, out, err = grade(tmp_path, "countdown", lines, capsys)
    assert err.strip().endswith("input.jsonl:2: invalid JSON (Expecting value at column 1)")
    assert [row["reward"] for row in rows] == [1.0, None, 0.0]
    assert rows[2]["reason"] == "uses [3, 8], not each of [3, 3, 8, 8] once"
    assert "2 scored, 1 skipped" in out and "mean reward 0.5000" in out


def test_format(tmp_path, capsys):
    lines = [json.dumps({"completion": r"\boxed{1}"}), "{oops}", json.dumps({"completion": "1"})]
    rows, _out, err = grade(tmp_path, "format", lines, capsys)
    assert "input.jsonl:2: invalid JSON" in err
    assert [(row["reward"], row["reason"]) for row in rows] == [
        (1.0, "boxed format: 1"), (None, rows[1]["reason"]), (0.0, "boxed format: 0")
    ]


def test_yaml_spec_file(tmp_path, capsys):
    spec = tmp_path / "grader.yaml"
    spec.write_text(textwrap.dedent(
        """\
        type: multi
        name: city_and_format
        graders:
          city:
            type: string_check
            input: "{{ sample.output_text }}"
            reference: "{{ item.city }}"
            operation: ilike
          close:
            type: text_similarity
            reference: "{{ item.city }}"
            evaluation_metric: fuzzy_match
        calculate_output: 0.5 * city + 0.5 * close
        """
    ))
    lines = [
        json.dumps({"completion": "paris", "city": "Paris"}),  # ilike 1, fuzzy 4/5 -> 0.9
        '{"completion": "Paris", "city": "Paris"',
        json.dumps({"completion": "Lyon", "city": "Paris"}),  # ilike 0, fuzzy 0 -> 0
        json.dumps({"completion": "Rome"}),  # no city column: skipped with a reason
    ]
    rows, out, err = grade(tmp_path, spec, lines, capsys)
    assert "input.jsonl:2:" in err and len(err.splitlines()) == 1
    assert [row["reward"] for row in rows] == pytest.approx([0.9, None, 0.0, None])
    assert rows[0]["reason"] == "city=1, close=0.8"
    assert rows[3]["reason"] == "city not scored: the row has no field 'city'"
    assert "with 'city_and_format'" in out


def test_judge_spec_through_the_cli(tmp_path, capsys, fake_judge):
    fake_judge.reply = lambda body: "correct" if "Paris" in body["messages"][0]["content"] else "incorrect"
    spec = tmp_path / "judge.json"
    spec.write_text(json.dumps({
        "type": "label_model", "name": "verdict", "model": "tiny", "base_url": fake_judge.url,
        "input": [{"role": "user", "content": "Is {{ sample.output_text }} the capital of {{ item.country }}?"}],
        "labels": ["correct", "incorrect"], "passing_labels": ["correct"],
    }))
    lines = [json.dumps({"completion": c, "country": "France"}) for c in ("Paris", "Lyon")]
    rows, _out, _ = grade(tmp_path, spec, lines, capsys)
    assert [row["reward"] for row in rows] == [1.0, 0.0]


def run_args(tmp_path, grader="math", input_name="input.jsonl", output_name="scored.jsonl"):
    parser = argparse.ArgumentParser(prog="rlvr")
    add_grade_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["grade", "--grader", grader, "--input", str(tmp_path / input_name),
                              "--output", str(tmp_path / output_name)])


def test_missing_input_file(tmp_path):
    with pytest.raises(UserError, match="input file .*missing.jsonl not found"):
        run_grade(run_args(tmp_path, input_name="missing.jsonl"))


def test_bad_spec_fails_before_the_output_is_written(tmp_path):
    (tmp_path / "input.jsonl").write_text("{}\n")
    with pytest.raises(UserError, match="did you mean 'math'"):
        run_grade(run_args(tmp_path, grader="mathh"))
    assert not (tmp_path / "scored.jsonl").exists()


def test_output_must_not_be_the_input(tmp_path):
    (tmp_path / "input.jsonl").write_text("{}\n")
    with pytest.raises(UserError, match="is the input file"):
        run_grade(run_args(tmp_path, output_name="input.jsonl"))


def test_user_error_is_one_line_from_the_command_line(tmp_path):
    command = [sys.executable, "-m", "rlvr", "grade", "--grader", "math",
               "--input", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "out.jsonl")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("rlvr: error: input file") and len(done.stderr.strip().splitlines()) == 1


def test_a_completion_that_is_not_text_is_rejected_not_scored_zero(tmp_path, capsys):
    lines = [json.dumps({"completion": c, "answer": "4"})
             for c in (r"\boxed{4}", 4, None, {"text": r"\boxed{4}"}, [{"role": "assistant"}], ["4"])]
    rows, out, err = grade(tmp_path, "math", lines, capsys)
    assert [row["reward"] for row in rows] == [1.0, None, None, None, None, None]
    assert len(err.splitlines()) == 5 and all("neither text nor a list of chat messages" in e for e in err.splitlines())
    assert "1 scored, 5 skipped (null; 5 malformed)" in out


BROKEN_AT_RUN_TIME = "import missing_module_xyz\ndef grade(sample, item):\n    return 1.0\n"


@pytest.mark.parametrize("source, message", [
    ("def grade(sample, item)\n    return 1.0\n", "its source does not compile: expected ':' (line 1)"),
    ("def score(sample, item):\n    return 1.0\n", "defines no grade(sample, item) function"),
    (BROKEN_AT_RUN_TIME, "failed on every row, so the scores mean nothing (first, line 1: grader failed (error): "
                         "ModuleNotFoundError: No module named 'missing_module_xyz'): fix the grader"),
])
def test_a_python_grader_that_cannot_run_is_an_error(tmp_path, source, message):
    spec = tmp_path / "grader.yaml"
    spec.write_text(json.dumps({"type": "python", "source": source}))
    (tmp_path / "input.jsonl").write_text('{"completion": "4"}\n{"completion": "5"}\n')
    with pytest.raises(UserError) as e:
        run_grade(run_args(tmp_path, grader=str(spec)))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_rows_a_python_grader_failed_on_are_counted(tmp_path, capsys):
    spec = tmp_path / "grader.yaml"
    spec.write_text(json.dumps({"type": "python", "source": "def grade(sample, item):\n"
                                                           "    return 1 / int(sample['output_text'])\n"}))
    rows, out, _ = grade(tmp_path, spec, [json.dumps({"completion": c}) for c in ("4", "0", "2")], capsys)
    assert [row["reward"] for row in rows] == [0.25, 0.0, 0.5]
    assert rows[1]["reason"].startswith("grader failed (error): ZeroDivisionError")
    assert "3 scored (1 of them 0 because the grader failed: see 'reason')" in out


def test_a_field_no_row_has_is_an_error_naming_the_columns_the_rows_have(tmp_path, capsys):
    """A template's misspelt field left every row null and exited 0; a field some rows lack is still per row."""
    spec = tmp_path / "grader.json"
    spec.write_text(json.dumps({"type": "string_check", "name": "city", "input": "{{ sample.output_text }}",
                                "reference": "{{ item.cty }}", "operation": "eq"}))
    (tmp_path / "input.jsonl").write_text('{"completion": "Paris", "city": "Paris"}\n{"completion": "Rome"}\n')
    with pytest.raises(UserError) as e:
        run_grade(run_args(tmp_path, grader=str(spec)))
    assert str(e.value) == (f"no row of {tmp_path / 'input.jsonl'} has a field grader 'city' reads (first, line 1: "
                            "the row has no field 'cty'); its rows have city, completion: fix the template or the file")
    spec.write_text(spec.read_text().replace("item.cty", "item.city"))
    rows, _out, _ = grade(tmp_path, spec, (tmp_path / "input.jsonl").read_text().splitlines(), capsys)
    assert [row["reward"] for row in rows] == [1.0, None]


def test_an_empty_input_file_is_an_error(tmp_path):
    (tmp_path / "input.jsonl").write_text("\n\n")
    with pytest.raises(UserError, match="holds no rows"):
        run_grade(run_args(tmp_path))


def test_a_trl_reward_for_conversations_grades_rows_that_are_conversations(tmp_path, capsys):
    """As training hands it over: the completion as the assistant's message where the row's prompt or completion is
    a list of messages (a TRL reward reading `c[0]["content"]` failed on every row), text elsewhere."""
    reward = tmp_path / "sumr.py"
    reward.write_text("def correct_sum(completions, total, **kwargs):\n"
                      "    texts = [c[0]['content'] if isinstance(c, list) else 'text:' + c for c in completions]\n"
                      "    return [float(t.strip() == str(n)) for t, n in zip(texts, total)]\n")
    chat = [{"role": "user", "content": "What is 2 + 2?"}]
    rows, _, _ = grade(tmp_path, f"{reward}:correct_sum", [
        json.dumps({"prompt": chat, "completion": "4", "total": 4}),
        json.dumps({"prompt": "What is 2 + 2?", "completion": [{"role": "assistant", "content": "4"}], "total": 4}),
        json.dumps({"prompt": "What is 2 + 2?", "completion": "4", "total": 4})], capsys)
    assert [row["reward"] for row in rows] == [1.0, 1.0, 0.0]  # (the last as text, as training gives text there)
