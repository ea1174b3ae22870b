"""A task of the user's own (rows without `answer` or tests, a reward of theirs) trains and is evaluated
held-out by its own correctness reward (rlvr.rl.heldout); without one, the run says why it evaluates nothing."""

import json

import pytest

from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo
from rlvr.rl import build

from .test_step import tiny_config

# The judge: 1 when the completion holds the row's `letter`, 0.5 when it holds a digit, else 0.
REWARD = '''
def has_letter(completions, letter, **kwargs):
    texts = [c if isinstance(c, str) else c[0]["content"] for c in completions]
    return [1.0 if l in t else 0.5 if any(ch.isdigit() for ch in t) else 0.0 for t, l in zip(texts, letter)]


def length_bonus(completions, **kwargs):
    return [0.0 for _ in completions]
'''


def write_task(tmp_path, rows=16, letter="e"):
    (tmp_path / "judge.py").write_text(REWARD)
    for name in ("train", "heldout"):
        with (tmp_path / f"{name}.jsonl").open("w") as f:
            for i in range(rows):
                f.write(json.dumps({"prompt": f"Write a word with the letter {letter} ({i})", "letter": letter}) + "\n")
    return tmp_path / "judge.py"


def config(tmp_path, *extra, steps=1):
    judge = write_task(tmp_path)
    return tiny_config(tmp_path, f"data.train={tmp_path / 'train.jsonl'}", "data.eval_size=8",
                       f"rewards=[{{name: '{judge}:has_letter'}}, {{name: '{judge}:length_bonus', weight: 0.1}}]",
                       *extra, steps=steps)


def test_the_held_out_answers_are_judged_by_the_runs_correctness_reward(tmp_path):
    summary = train_grpo(config(tmp_path, f"data.eval={tmp_path / 'heldout.jsonl'}"))
    assert summary["before"]["n"] == 8 and "heldout_skipped" not in summary
    assert summary["before"]["strict"] == summary["before"]["lenient"]  # one judge: the reward, as a verdict
    # the random model's completions hold an "e" in some rows: the verdict is the reward's 1.0, not its 0.5
    judged = summary["before"]["strict"]["mean"]
    assert 0.0 <= judged <= 1.0


def test_correct_at_sets_the_score_that_counts_as_correct(tmp_path, monkeypatch):
    """A verdict is the reward at or above correct_at: at 0.5 the digit-only completions count too."""
    seen = {}
    real = build.heldout_judge

    def spy(*args, **kwargs):
        seen["held"] = held = real(*args, **kwargs)
        return held

    monkeypatch.setattr(build, "heldout_judge", spy)
    judge = write_task(tmp_path)
    for at, expected in ((1.0, [1.0, 0.0, 0.0]), (0.5, [1.0, 1.0, 0.0])):
        entries = (f"rewards=[{{name: '{judge}:has_letter', correct_at: {at}}}]")
        build.build_parts(tiny_config(tmp_path, f"data.train={tmp_path / 'train.jsonl'}",
                                      f"data.eval={tmp_path / 'heldout.jsonl'}", entries))
        strict, lenient = seen["held"].judge
        assert strict(completions=["hello", "h3llo", "hi"], letter=["e"] * 3) == expected
        assert lenient is strict


def test_held_out_rows_without_the_rewards_column_are_refused_before_the_model_loads(tmp_path, monkeypatch):
    (tmp_path / "bad.jsonl").write_text(json.dumps({"prompt": "Write a word"}) + "\n")
    monkeypatch.setattr(build, "load_configured", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(UserError) as e:
        build.build_parts(config(tmp_path, f"data.eval={tmp_path / 'bad.jsonl'}"))
    assert "held-out row 1 of" in str(e.value) and "'letter'" in str(e.value) and "has_letter" in str(e.value)


def test_a_run_without_held_out_prompts_says_why_in_one_line_and_in_the_summary(tmp_path, capsys):
    summary = train_grpo(config(tmp_path))
    said = [line for line in capsys.readouterr().err.splitlines() if "no held-out evaluation" in line]
    train = tmp_path / "train.jsonl"
    assert said == [f"rlvr: no held-out evaluation: no held-out prompts: data.train is {train}, which has no "
                    "held-out split, and data.eval is not set (give data.eval)"]
    assert summary["before"] is None and summary["heldout_skipped"].startswith("no held-out prompts")


@pytest.mark.parametrize(("train", "said"), [
    ("verifiers:vf_env?kind=digit", "the verifiers environment vf_env has no eval_dataset, and data.eval is not set "
                                    "(give the environment an eval_dataset, or data.eval)"),
    ("{run}/inputs/train.jsonl", "the training rows came from Python, and eval_data was not given (give "
                                 "eval_data=...)"),
])
def test_no_held_out_prompts_is_said_in_the_words_of_how_the_rows_were_given(tmp_path, train, said):
    """Rows in memory and a verifiers source were both told "data.train is a file"."""
    from rlvr.config import load_config
    from rlvr.rl.heldout import heldout_judge

    run = tmp_path / "run"
    c = load_config(None, [f"data.train={train.format(run=run)}", f"output_dir={run}"])
    assert heldout_judge(c, None, None, None, None).skipped == f"no held-out prompts: {said}"


def test_a_run_whose_rewards_check_no_answers_on_rows_without_a_verifier_says_so(tmp_path):
    judge = write_task(tmp_path)
    summary = train_grpo(tiny_config(tmp_path, f"data.train={tmp_path / 'train.jsonl'}",
                                     f"data.eval={tmp_path / 'heldout.jsonl'}",
                                     f"rewards=[{{name: '{judge}:has_letter', correctness: false}}]", steps=1))
    assert summary["before"] is None and "no reward checks answers" in summary["heldout_skipped"]
