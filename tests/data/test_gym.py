"""reasoning-gym's tasks as a data source (rlvr.data.tasks.gym) scored by their own scorers (rlvr.rewards.gym)."""

import json

import pytest

pytest.importorskip("reasoning_gym")

import reasoning_gym

from rlvr.data import find_task, load_examples
from rlvr.data.tasks import gym
from rlvr.errors import UserError
from rlvr.rewards import load_reward_function

CHAIN = "reasoning_gym:chain_sum"


def questions(rows):
    return [row["question"] for row in rows]


def test_held_out_rows_are_never_trained_on_and_each_split_is_deterministic():
    train = gym.generate(CHAIN, 300, split="train", seed=1, difficulty=3)
    test = gym.generate(CHAIN, 100, split="test", seed=1, difficulty=3)
    other_seed = gym.generate(CHAIN, 300, split="train", seed=2, difficulty=3)
    assert not set(questions(test)) & (set(questions(train)) | set(questions(other_seed)))
    assert len(set(questions(train))) == 300 and len(set(questions(test))) == 100  # distinct within a split
    assert questions(train) == questions(gym.generate(CHAIN, 300, split="train", seed=1, difficulty=3))
    assert questions(train) != questions(other_seed)
    json.dumps(train)  # (rows are written to samples.jsonl)
    small_train = gym.generate(CHAIN, 60, split="train", seed=0, difficulty=1)  # (from ~200 one-digit sums)
    small_test = gym.generate(CHAIN, 15, split="test", seed=0, difficulty=1)
    assert not set(questions(small_train)) & set(questions(small_test))


def test_difficulty_is_the_curriculum_level_and_settings_override_it():
    def terms(source, difficulty):
        return {row["metadata"]["num_terms"] for row in gym.generate(source, 60, seed=0, difficulty=difficulty)}

    assert terms(CHAIN, 1) == {2}  # chain_sum's level 1: two terms
    assert max(terms(CHAIN, 3)) == 4 and min(terms(CHAIN, 3)) == 2  # level 3: two to four
    assert terms(f"{CHAIN}?min_terms=3&max_terms=3", 1) == {3}
    assert all(row["prompt"].endswith(gym.INSTRUCTION) and row["difficulty"] == 2
               for row in gym.generate(CHAIN, 3, seed=0, difficulty=2))


@pytest.mark.parametrize("source, difficulty, message", [
    ("reasoning_gym:chain_summ", 1, "reasoning-gym has no task 'chain_summ'; did you mean 'chain_sum'?"),
    (f"{CHAIN}?max_term=3", 1, "has no setting 'max_term' (did you mean 'max_terms'?)"),
    (f"{CHAIN}?min_terms=5&max_terms=2", 1, "refuses the settings {'min_terms': 5, 'max_terms': 2} at difficulty 1"),
    (f"{CHAIN}?max_terms", 1, "settings go after '?' as name=value pairs"),
    (f"{CHAIN}?=&", 1, "settings go after '?' as name=value pairs"),
    (CHAIN, 12, "difficulty 12 is unknown; use one of 1, 2"),
    ("reasoning_gym:gsm_symbolic", 2, "difficulty 2 is unknown; use one of 1"),  # (no curriculum: one level)
])
def test_a_bad_task_setting_or_difficulty_is_one_line(source, difficulty, message):
    with pytest.raises(UserError) as error:
        load_examples(source, limit=2, difficulty=difficulty)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_without_the_package_the_fix_is_named(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "reasoning_gym" else real(name, *args))
    with pytest.raises(UserError, match="pip install reasoning-gym"):
        gym.check("reasoning_gym:leg_counting")


def test_the_reward_is_the_tasks_own_score_partial_credit_kept():
    row = gym.generate(CHAIN, 1, seed=0, difficulty=2)[0]
    entry = {"question": row["question"], "answer": row["answer"], "metadata": row["metadata"]}
    given = [row["answer"], f"{row['answer']} or 7", "none", None]
    texts = [f"so \\boxed{{{g}}}" if g is not None else "no idea" for g in given]
    columns = {"answer": [row["answer"]] * 4, "metadata": [row["metadata"]] * 4, "question": [row["question"]] * 4}
    scores = load_reward_function("reasoning_gym")(completions=texts, **columns)
    expected = [reasoning_gym.get_score_answer_fn("chain_sum")(g, entry) for g in given]
    assert list(scores) == expected
    assert expected[0] == 1.0 and 0 < expected[1] < 1 and expected[2] == 0.0 == expected[3]  # partial credit kept
    assert list(load_reward_function("reasoning_gym_solved")(completions=texts, **columns)) == [1.0, 0.0, 0.0, 0.0]


def test_a_scorer_that_raises_scores_the_answer_zero(monkeypatch):
    import rlvr.rewards.gym as module

    def broken(answer, entry):
        raise KeyError("metadata")

    monkeypatch.setattr(module, "_scorer", lambda task: broken)
    scores = module.reasoning_gym(["\\boxed{1}", "x"], answer=["1", "1"], metadata=[{"source_dataset": "t"}, {}])
    assert list(scores) == [0.0, None] and "scorer failed" in scores.reasons[0]


def test_the_task_trains_on_its_own_scorer_and_is_judged_by_it(tmp_path):
    from rlvr.config import load_config
    from rlvr.grpo.trainer import Trainer

    config = load_config(None, ["model.name=tiny", f"data.train={CHAIN}", "data.train_size=16", "data.eval_size=4",
                                "sampling.group_size=4", "sampling.batch_size=8", "generation.max_new_tokens=8",
                                "sample_every=0", f"output_dir={tmp_path / 'run'}"], max_steps=1)
    trainer = Trainer(config)
    assert [spec.name for spec in trainer.parts.rewards] == ["reasoning_gym", "boxed_format"]
    assert trainer.parts.correctness == "reasoning_gym"
    held = {p.example.columns["question"] for p in trainer.parts.eval}
    trained = {p.example.columns["question"] for p in trainer.parts.train}
    assert held and not held & trained
    assert "accuracy" in trainer.step().metrics
    assert find_task(CHAIN).scoring.strict == "reasoning_gym_solved"


def test_under_the_curriculum_training_spans_the_levels_up_to_the_difficulty(tmp_path):
    """data.curriculum with a reasoning-gym task: training rows of levels 1..difficulty evenly, for the pass-rate
    curriculum to walk up; the held-out rows at the difficulty itself, none of them trained on."""
    from collections import Counter

    from rlvr.config import load_config
    from rlvr.rl.build import build_parts

    config = load_config(None, ["model.name=tiny", f"data.train={CHAIN}", "data.difficulty=3", "data.curriculum=true",
                                "data.train_size=30", "data.eval_size=6", "sampling.group_size=2",
                                "sampling.batch_size=4", f"output_dir={tmp_path / 'run'}"], max_steps=1)
    parts = build_parts(config)
    assert Counter(p.example.columns["difficulty"] for p in parts.train) == {1: 10, 2: 10, 3: 10}
    assert [p.example.index for p in parts.train] == list(range(30))
    assert {p.example.columns["difficulty"] for p in parts.eval} == {3}
    asked = {p.example.columns["question"] for p in parts.train}
    assert not {p.example.columns["question"] for p in parts.eval} & asked


def test_rlvr_eval_takes_a_task_and_judges_it_by_its_scorer(tmp_path):
    """`rlvr eval --data reasoning_gym:...`: its test split, the task's scorer as both verifiers, a vote key."""
    from rlvr.config import EvalConfig, config_from_dict
    from rlvr.evaluate.runner import run_eval
    from rlvr.evaluate.store import EvalStore

    source = f"{CHAIN}?max_terms=3"
    summary = run_eval(config_from_dict(EvalConfig, dict(model="tiny", data=source, difficulty=2, limit=3, samples=2,
                                                         max_new_tokens=6, output_dir=str(tmp_path), threads=1)),
                       progress=False)
    assert summary["settings"]["verifiers"] == {"strict": "reasoning_gym_solved", "lenient": "reasoning_gym_solved"}
    assert summary["settings"]["difficulty"] == 2 and summary["strict"]["problems"] == 3
    assert summary["strict"]["maj@k"] is not None  # (answers vote by their boxed text)
    records = EvalStore(tmp_path).read()
    test_rows = gym.generate(source, 3, split="test", seed=0, difficulty=2)
    assert [r.gold for r in records] == [row["answer"] for row in test_rows]
    trained = set(questions(gym.generate(source, 200, split="train", seed=0, difficulty=2)))
    assert not trained & set(questions(test_rows))


def test_a_curriculum_past_the_tasks_levels_names_the_difficulty_asked(tmp_path, capsys):
    """data.difficulty=50 under data.curriculum: said of 50, the setting given (the levels below it were loaded
    first, and the first missing one was named)."""
    from rlvr.cli import main

    assert main(["train", "--set", "model.name=tiny", "--set", f"data.train={CHAIN}", "--set", "data.difficulty=50",
                 "--set", "data.curriculum=true", "--output-dir", str(tmp_path / "run")]) == 2
    assert "difficulty 50 is unknown; use one of 1, 2" in capsys.readouterr().err
