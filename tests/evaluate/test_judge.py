"""`rlvr eval --reward`: a custom task judged by the user's own reward (rlvr.evaluate.judge), and the
benchmark's instruction as a setting."""

import json
import time
from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.errors import UserError
from rlvr.evaluate import runner
from rlvr.evaluate.benchmarks import R1_INSTRUCTION, load_benchmark
from rlvr.evaluate.store import EvalStore

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

JUDGE = '''
def has_letter(completions, letter, **kwargs):
    """1 for a completion with the row's letter in it, 0.5 for one with a digit, else 0 (TRL's chat form)."""
    texts = [c[0]["content"] for c in completions]
    return [1.0 if l in t else 0.5 if any(ch.isdigit() for ch in t) else 0.0 for t, l in zip(texts, letter)]
'''


@pytest.fixture
def task(tmp_path):
    (tmp_path / "judge.py").write_text(JUDGE)
    rows = [{"prompt": f"Write a word with the letter {letter}", "letter": letter} for letter in "eaoitn"]
    (tmp_path / "words.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def evaluate(task, out, *extra):
    code = main(["eval", "--model", "tiny", "--data", str(task / "words.jsonl"), "--reward",
                 f"{task / 'judge.py'}:has_letter", "--samples", "4", "--max-new-tokens", "10", "--threads", "1",
                 "--output-dir", str(task / out), *extra])
    assert code == 0
    return json.loads((task / out / "summary.json").read_text()), EvalStore(task / out).read()


def expected(record, letter, at):
    """What has_letter, read as a verdict at `at`, says of each sample of `record`."""
    scores = [1.0 if letter in s.text else 0.5 if any(ch.isdigit() for ch in s.text) else 0.0 for s in record.samples]
    return [float(score >= at) for score in scores]


@pytest.mark.parametrize("at", [None, 0.5])
def test_every_sample_is_judged_by_the_reward_as_a_verdict(task, at):
    summary, records = evaluate(task, f"e{at}", *(["--correct-at", str(at)] if at else []))
    for record, letter in zip(records, "eaoitn"):
        assert [s.correct["strict"] for s in record.samples] == expected(record, letter, at or 1.0)
        assert [s.correct["lenient"] for s in record.samples] == expected(record, letter, at or 1.0)
    assert summary["settings"]["verifiers"] == {"strict": f"{task / 'judge.py'}:has_letter",
                                                "lenient": f"{task / 'judge.py'}:has_letter"}
    assert summary["settings"]["extraction"]["strict"].endswith(f"scores it {at or 1.0:g} or more")
    assert summary["settings"]["voting"] is False and summary["strict"]["maj@k"] is None
    assert "pass@k" in summary["strict"]


def test_a_file_without_a_verifier_and_no_reward_is_one_line_naming_the_fix(task, capsys):
    assert main(["eval", "--model", "tiny", "--data", str(task / "words.jsonl"), "--output-dir",
                 str(task / "e")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--reward file.py:function" in error


def test_rows_without_the_rewards_column_are_refused_before_the_model_loads(task, monkeypatch):
    (task / "words.jsonl").write_text(json.dumps({"prompt": "Write a word"}) + "\n")
    monkeypatch.setattr(runner, "load_configured", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(UserError, match="problem 1 of .* has no 'letter' column, which the reward"):
        from rlvr.config import EvalConfig, config_from_dict

        runner.run_eval(config_from_dict(EvalConfig, {"model": "tiny", "data": str(task / "words.jsonl"),
                                                      "reward": f"{task / 'judge.py'}:has_letter",
                                                      "output_dir": str(task / "e")}), progress=False)


def test_correct_at_without_a_reward_is_one_line(task, capsys):
    assert main(["eval", "--model", "tiny", "--data", "arithmetic", "--correct-at", "0.5"]) == 2
    assert "--reward" in capsys.readouterr().err


def test_files_are_asked_as_they_are_unless_an_instruction_is_given(task):
    maths = task / "m.jsonl"
    maths.write_text(json.dumps({"question": "What is 1 + 1?", "answer": "2"}) + "\n")
    assert load_benchmark(str(maths)).examples[0].prompt == "What is 1 + 1?"
    assert load_benchmark(str(maths), instruction="Answer in one word.").examples[0].prompt == (
        "What is 1 + 1?\nAnswer in one word.")
    chat = task / "c.jsonl"
    chat.write_text(json.dumps({"prompt": [{"role": "user", "content": "Hi?"}], "answer": "2"}) + "\n")
    assert load_benchmark(str(chat), instruction="Be brief.").examples[0].prompt == [
        {"role": "user", "content": "Hi?\nBe brief."}]


@pytest.mark.skipif(not (DATA / "gsm8k" / "test.jsonl").exists(), reason="../shared/data is not beside the repo")
def test_the_maths_benchmarks_keep_r1s_instruction_unless_told_otherwise():
    asked = load_benchmark("gsm8k", data_dir=str(DATA), limit=1).examples[0].prompt
    bare = load_benchmark("gsm8k", data_dir=str(DATA), limit=1, instruction="").examples[0].prompt
    other = load_benchmark("gsm8k", data_dir=str(DATA), limit=1, instruction="Be brief.").examples[0].prompt
    assert asked == f"{bare}\n{R1_INSTRUCTION}" and other == f"{bare}\nBe brief." and R1_INSTRUCTION not in bare


BAD_JUDGES = '''
def strings(completions, **kwargs):
    return ["yes"] * len(completions)


def scalar(completions, **kwargs):
    return 1.0


def nans(completions, **kwargs):
    return [float("nan")] * len(completions)
'''


@pytest.mark.parametrize(("judge", "said"), [
    ("strings", "returned str 'yes' for completion 0 (return a finite float, or None"),
    ("scalar", "returned float 1.0, not a list of 6 floats (return one float or None per completion)"),
    ("nans", "judged none of the 30 completions (it returned None or NaN for every one), so there is no accuracy"),
])
def test_a_judge_returning_what_no_verdict_can_be_read_from_is_one_line(task, capsys, judge, said):
    """Said as training says it (what was returned), not "raised TypeError"; a judge of NaN only gives no
    accuracy, not a table of nan% over 0 problems."""
    (task / "bad.py").write_text(BAD_JUDGES)
    code = main(["eval", "--model", "tiny", "--data", str(task / "words.jsonl"), "--reward",
                 f"{task / 'bad.py'}:{judge}", "--samples", "4", "--max-new-tokens", "4", "--threads", "1",
                 "--output-dir", str(task / judge)])
    err = capsys.readouterr().err
    assert code == 2 and said in err.strip().splitlines()[-1] and "TypeError" not in err


@pytest.mark.parametrize("at", ["nan", "inf", "1e999"])
def test_correct_at_must_be_a_finite_number(task, capsys, at):
    assert main(["eval", "--model", "tiny", "--data", str(task / "words.jsonl"), "--reward",
                 f"{task / 'judge.py'}:has_letter", "--correct-at", at]) == 2
    assert f"reward.correct_at={float(at)} is not a finite number" in capsys.readouterr().err


HANGING = '''
import time

def hang(completions, **kwargs):
    time.sleep(3600)
'''


def test_a_judge_past_its_time_limit_is_one_line_naming_the_setting(task, capsys):
    """reward.timeout_s bounds each call of the judge as it bounds a training reward (it ran for ever)."""
    (task / "slow.py").write_text(HANGING)
    start = time.monotonic()
    code = main(["eval", "--model", "tiny", "--data", str(task / "words.jsonl"), "--reward",
                 f"{task / 'slow.py'}:hang", "--set", "reward.timeout_s=0.5", "--samples", "1", "--max-new-tokens",
                 "4", "--threads", "1", "--output-dir", str(task / "slow")])
    assert code == 2 and time.monotonic() - start < 60
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "did not return within its time limit of 0.5 s (make it faster, or raise reward.timeout_s; 0 = no limit)")


def test_held_out_answers_judged_by_a_hanging_correctness_reward_stop_at_its_limit(tmp_path, capsys):
    """A run's held-out rows with no verifier of their own are judged by its correctness reward, under that
    reward's time limit (eval_before waited for ever)."""
    (tmp_path / "slow.py").write_text(HANGING)
    rows = "".join(json.dumps({"prompt": f"Say {i}", "target": str(i)}) + "\n" for i in range(8))
    (tmp_path / "rows.jsonl").write_text(rows)
    config = {"model": {"name": "tiny"}, "data": {"train": str(tmp_path / "rows.jsonl"),
                                                  "eval": str(tmp_path / "rows.jsonl")},
              "rewards": [{"name": f"{tmp_path / 'slow.py'}:hang", "correctness": True, "timeout_s": 0.5}],
              "max_steps": 1, "generation": {"max_new_tokens": 4}, "threads": 1,
              "output_dir": str(tmp_path / "run")}
    (tmp_path / "run.yaml").write_text(json.dumps(config))
    start = time.monotonic()
    assert main(["train", "--config", str(tmp_path / "run.yaml")]) == 2
    assert time.monotonic() - start < 60
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "did not return within its time limit of 0.5 s (make it faster, or raise rewards[].timeout_s; 0 = no limit)")


def test_a_resumed_evaluation_refuses_other_reward_params(task, capsys):
    """The reward's params decide its verdicts as much as its name: an evaluation resumed with others (into the
    same directory) would keep every verdict the old ones gave."""
    (task / "judge.py").write_text(JUDGE + "\n\ndef has_letter(completions, letter, at_least=1, **kwargs):\n"
                                   "    return [float(c[0]['content'].count(l) >= at_least) "
                                   "for c, l in zip(completions, letter)]\n")
    summary, _ = evaluate(task, "p", "--limit", "2", "--set", "reward.params={at_least: 1}")
    assert summary["settings"]["reward_params"] == {"at_least": 1}
    capsys.readouterr()
    with pytest.raises(AssertionError):
        evaluate(task, "p", "--set", "reward.params={at_least: 2}")
    assert "other settings (reward_params: {'at_least': 1} there, {'at_least': 2} now)" in capsys.readouterr().err
