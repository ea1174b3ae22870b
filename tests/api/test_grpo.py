"""rlvr.GRPO: a run from Python with functions and in-memory data, equal to the same run named in a config."""

import errno
import functools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import datasets
import pytest
import yaml

from rlvr import GRPO, evaluate_model, paths
from rlvr.errors import UserError

from ..train import objective_fns, reward_fns

REWARD_FNS = Path(reward_fns.__file__)
TINY = {"data": {"train_size": 16, "eval_size": 4}, "sampling": {"group_size": 4, "batch_size": 8},
        "generation": {"max_new_tokens": 12, "temperature": 1.0}, "optim": {"lr": 1e-3}, "sample_every": 0,
        "threads": 1}
ROWS = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b), "level": a} for a in range(4) for b in range(4)]


CLOCKS = ("time/", "memory/", "tokens_per_second")  # what the machine measures, not the run


def metrics(run_dir):
    """The run's metrics, step by step, but those of the clock and the memory."""
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(CLOCKS) and not k.endswith("seconds")}
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def grpo(tmp_path, name, **given):
    settings = {"model": "tiny", "train_data": ROWS, "max_steps": 2, "config": TINY, "eval_before": False,
                "eval_after": False, **given}
    return GRPO(output_dir=tmp_path / name, **settings)


def test_functions_and_rows_from_python_run_as_the_same_run_named_in_a_config(tmp_path):
    """digit_share given as the function and as `file.py:digit_share`, the rows as a list and as a file: the
    same steps, metric for metric; config.yaml names the function where it lives."""
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    as_objects = grpo(tmp_path, "objects", rewards=[reward_fns.digit_share])
    as_names = grpo(tmp_path, "names", rewards=[f"{REWARD_FNS}:digit_share"], train_data=str(tmp_path / "rows.jsonl"))
    as_objects.train(), as_names.train()
    assert metrics(tmp_path / "objects") == [
        {k.replace(f"{REWARD_FNS}:digit_share", "tests/train/reward_fns.py:digit_share"): v for k, v in m.items()}
        for m in metrics(tmp_path / "names")]
    written = yaml.safe_load((tmp_path / "objects" / "config.yaml").read_text())
    assert written["rewards"][0]["name"] == "tests/train/reward_fns.py:digit_share"
    assert written["data"]["train"] == str(tmp_path / "objects" / "inputs" / "train.jsonl")
    assert (tmp_path / "objects" / "inputs" / "train.jsonl").read_text() == (tmp_path / "rows.jsonl").read_text()


@pytest.mark.parametrize("form", ["Dataset", "IterableDataset", "DataFrame", "save_to_disk", "tuple"])
def test_every_form_of_in_memory_data_is_the_same_rows(tmp_path, form):
    made = {"Dataset": lambda: datasets.Dataset.from_list(ROWS),
            "IterableDataset": lambda: datasets.Dataset.from_list(ROWS).to_iterable_dataset(),
            "DataFrame": lambda: __import__("pandas").DataFrame(ROWS),
            "tuple": lambda: tuple(ROWS)}
    if form == "save_to_disk":
        datasets.Dataset.from_list(ROWS).save_to_disk(tmp_path / "saved")
        data = str(tmp_path / "saved")
    else:
        data = made[form]()
    run = grpo(tmp_path, form, rewards=[reward_fns.digit_share], train_data=data, max_steps=1)
    run.train()
    reference = grpo(tmp_path, "list", rewards=[reward_fns.digit_share], max_steps=1)
    reference.train()
    assert metrics(tmp_path / form) == metrics(tmp_path / "list")


def test_policy_loss_advantage_fn_and_environment_as_objects(tmp_path):
    from rlvr.envs.guess import GuessNumber

    run = grpo(tmp_path, "objectives", rewards=[reward_fns.digit_share],
               config={**TINY, "algorithm": {"policy_loss": objective_fns.reinforce,
                                             "advantage_fn": objective_fns.ranked}})
    run.train()
    named = grpo(tmp_path, "named", rewards=[reward_fns.digit_share],
                 config={**TINY, "algorithm": {"policy_loss": f"{objective_fns.__file__}:reinforce",
                                               "advantage_fn": f"{objective_fns.__file__}:ranked"}})
    named.train()
    assert [m["loss"] for m in metrics(tmp_path / "objectives")] == [m["loss"] for m in metrics(tmp_path / "named")]
    game = grpo(tmp_path, "game", rewards=["environment_reward"], environment=GuessNumber, max_steps=1,
                config={**TINY, "environment": {"params": {"max_turns": 2}, "max_turns": 2, "max_tokens": 64}})
    assert game.config.environment.name == "rlvr.envs.guess:GuessNumber"
    assert "env/turns" in game.train() or "env/turns" in metrics(tmp_path / "game")[0]


def test_a_callback_stops_the_run_saved_and_resuming_it_equals_an_unbroken_run(tmp_path):
    unbroken = grpo(tmp_path, "unbroken", rewards=[reward_fns.digit_share], max_steps=3)
    unbroken.train()
    seen = []

    def stop_at_two(step, logged):
        seen.append((step, "loss" in logged))
        return step == 2

    stopped = grpo(tmp_path, "stopped", rewards=[reward_fns.digit_share], max_steps=3, callbacks=[stop_at_two])
    summary = stopped.train()
    assert summary["stopped_at"] == 2 and summary["stopped_by"] is None and seen == [(1, True), (2, True)]
    again = grpo(tmp_path, "stopped", rewards=[reward_fns.digit_share], max_steps=3)
    assert again.train(resume=True)["steps"] == 3
    assert metrics(tmp_path / "stopped") == metrics(tmp_path / "unbroken")


def test_a_callback_that_raises_is_one_line_after_the_run_saved(tmp_path):
    def broken(step, logged):
        raise ValueError("no such metric")

    run = grpo(tmp_path, "broken", rewards=[reward_fns.digit_share], max_steps=3, callbacks=[broken])
    with pytest.raises(UserError) as e:
        run.train()
    assert "callback broken raised ValueError: no such metric at step 1" in str(e.value)
    assert "resume=True" in str(e.value) and paths.latest_checkpoint(tmp_path / "broken") == paths.step_dir(
        tmp_path / "broken", 1)


def test_resuming_names_python_s_own_fix_and_refuses_other_rows(tmp_path):
    run = grpo(tmp_path, "run", rewards=[reward_fns.digit_share], max_steps=1)
    run.train()
    with pytest.raises(UserError, match="already holds a run: continue it with resume=True, start afresh over it "
                                        "with overwrite=True, or pick another output_dir"):
        grpo(tmp_path, "run", rewards=[reward_fns.digit_share], max_steps=1).train()
    with pytest.raises(UserError, match="give one"):
        grpo(tmp_path, "run", rewards=[reward_fns.digit_share], max_steps=1).train(resume=True, overwrite=True)
    with pytest.raises(UserError, match="the train data given differs from the rows"):
        grpo(tmp_path, "run", rewards=[reward_fns.digit_share], train_data=ROWS[:8], max_steps=2).train(resume=True)


def test_a_function_no_other_process_can_import_is_one_line_when_the_command_resumes_it(tmp_path):
    def local_reward(completions, **kwargs):
        return reward_fns.digit_share(completions)

    run = grpo(tmp_path, "local", rewards=[local_reward], max_steps=1)
    run.train()
    assert "<locals>.local_reward" in run.config.rewards[0].name
    resumed = subprocess.run([sys.executable, "-m", "rlvr", "train", "--resume", str(tmp_path / "local"),
                              "--max-steps", "2"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    assert "cannot be imported from here: pass it again from Python" in resumed.stderr.strip().splitlines()[-1]


def test_a_loaded_model_is_saved_into_the_run_and_trained(tmp_path):
    from rlvr.models.loading import build_tiny_model

    model, tokenizer = build_tiny_model(0)
    run = grpo(tmp_path, "loaded", model=model, tokenizer=tokenizer, rewards=[reward_fns.digit_share], max_steps=1)
    run.train()
    assert (tmp_path / "loaded" / "inputs" / "model" / "config.json").is_file()
    assert run.config.model.name == str(tmp_path / "loaded" / "inputs" / "model")
    with pytest.raises(UserError, match="give a name"):
        GRPO(model=object(), train_data=ROWS, output_dir=tmp_path / "x").train()


def test_evaluate_judges_custom_rows_by_the_runs_correctness_reward_and_save_writes_a_transformers_folder(tmp_path):
    rows = [{"prompt": f"Say {w}", "word": w} for w in ("a", "b", "c")]

    def said(completions, word, **kwargs):
        return [float(w in c[0]["content"]) for c, w in zip(completions, word)]

    run = grpo(tmp_path, "custom", rewards=[said], train_data=rows, eval_data=rows, max_steps=1, eval_after=True)
    summary = run.train()
    assert summary["after"]["n"] == 3
    results = run.evaluate(samples=2)
    assert results["settings"]["verifiers"]["strict"] == run.config.rewards[0].name
    assert results["strict"]["greedy"]["mean"] == summary["after"]["strict"]["mean"]  # the same judge, greedy
    direct = evaluate_model(tmp_path / "custom", rows, reward=said, samples=2, output_dir=tmp_path / "direct",
                            config={"data": {"template": "chat"}, "generation": {"max_new_tokens": 12}}, threads=1)
    assert direct["strict"]["pass@k"] == results["strict"]["pass@k"]
    from transformers import AutoModelForCausalLM

    saved = run.save(tmp_path / "export")
    assert AutoModelForCausalLM.from_pretrained(saved).num_parameters() > 0


def test_one_reward_may_be_given_alone(tmp_path):
    assert [r.name for r in grpo(tmp_path, "one", rewards=reward_fns.digit_share).config.rewards] == [
        "tests/train/reward_fns.py:digit_share"]
    assert [r.name for r in grpo(tmp_path, "named", rewards="boxed_format").config.rewards] == ["boxed_format"]


def test_a_mistake_from_python_is_a_user_error_with_a_short_traceback(tmp_path):
    """A reward returning one value for eight completions: rlvr.UserError raised from the caller's own call, the
    traceback within 10 lines (rlvr's frames dropped); RLVR_FULL_TRACEBACK=1 keeps them."""
    script = tmp_path / "short_reward.py"
    script.write_text(
        "from rlvr import GRPO\n\n\ndef short(completions, **kwargs):\n    return [1.0]\n\n\n"
        f"GRPO('tiny', rewards=[short], train_data={ROWS!r}, max_steps=1, config={TINY!r}, eval_before=False,\n"
        f"     eval_after=False, output_dir={str(tmp_path / 'run')!r}).train()\n")

    def traceback(**env):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "OMP_NUM_THREADS": "1", **env})
        assert done.returncode == 1 and "Traceback" in done.stderr, done.stderr[-3000:]
        return done.stderr[done.stderr.index("Traceback (most recent call last)"):].strip().splitlines()

    short = traceback()
    assert len(short) <= 10, "\n".join(short)
    assert short[-1].startswith("rlvr.errors.UserError: ") and "short" in short[-1], short[-1]
    assert sum('File "' in line for line in short) == 2  # the caller's line, and the API's entry
    assert len(traceback(RLVR_FULL_TRACEBACK="1")) > 10


def test_another_loaded_model_into_the_same_folder_is_refused_not_swapped(tmp_path):
    """evaluate_model(B, output_dir=D) after evaluate_model(A, output_dir=D): the copy of A kept in D is not
    B; one line says so (the same model again is its own copy: resumed)."""
    from rlvr.models.loading import build_tiny_model

    (a, tokenizer), (b, _) = build_tiny_model(0), build_tiny_model(1)
    settings = {"reward": reward_fns.digit_share, "samples": 2, "output_dir": tmp_path / "eval", "threads": 1,
                "generation": {"max_new_tokens": 8}}
    first = evaluate_model(a, ROWS[:4], tokenizer=tokenizer, **settings)
    assert evaluate_model(a, ROWS[:4], tokenizer=tokenizer, **settings)["strict"] == first["strict"]
    with pytest.raises(UserError, match=r"holds the work of another model than the one given .*give another "
                                        r"output_dir"):
        evaluate_model(b, ROWS[:4], tokenizer=tokenizer, **settings)
    run = grpo(tmp_path, "loaded", model=a, tokenizer=tokenizer, rewards=[reward_fns.digit_share], max_steps=1)
    run.train()
    with pytest.raises(UserError, match="holds the work of another model"):  # resuming a run with another model
        grpo(tmp_path, "loaded", model=b, tokenizer=tokenizer, rewards=[reward_fns.digit_share],
             max_steps=2).train(resume=True)


def constant(completions, value, **kwargs):
    return [value] * len(completions)


class Judge:
    def __init__(self, value):
        self.value = value

    def __call__(self, completions, **kwargs):
        return [self.value] * len(completions)


@pytest.mark.parametrize("make", [lambda v: functools.partial(constant, value=v), Judge], ids=["partial", "instance"])
def test_reward_objects_without_their_own_name_each_train_as_themselves(tmp_path, make):
    """Two GRPO objects in one process, each with its own partial (or instance of a class with __call__): each
    trains on its own reward, not on the one built last; two in one list are two rewards."""
    paid, unpaid = grpo(tmp_path, "paid", rewards=[make(1.0)], max_steps=1), grpo(tmp_path, "unpaid",
                                                                                 rewards=[make(0.0)], max_steps=1)
    assert paid.config.rewards[0].name != unpaid.config.rewards[0].name
    paid.train()
    assert metrics(tmp_path / "paid")[0]["reward/mean"] == 1.0
    both = grpo(tmp_path, "both", rewards=[make(1.0), {"name": make(0.0), "weight": 0.5}], max_steps=1)
    both.train()  # (two rewards, not "the same reward function twice")
    assert metrics(tmp_path / "both")[0]["reward/mean"] == 1.0
    resumed = subprocess.run([sys.executable, "-m", "rlvr", "train", "--resume", str(tmp_path / "paid"),
                              "--max-steps", "2"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    assert "cannot be imported from here: pass it again from Python" in resumed.stderr.strip().splitlines()[-1]


def exits(step, logged):
    sys.exit(7)


def interrupts(step, logged):
    raise KeyboardInterrupt


def blocks(step, logged):
    time.sleep(120)


@pytest.mark.parametrize(("callback", "said"), [
    (exits, "callback exits called sys.exit(7)"), (interrupts, "callback interrupts raised KeyboardInterrupt itself"),
    (blocks, "callback blocks did not return within its time limit of 1 s")])
def test_a_callback_that_exits_interrupts_or_blocks_ends_in_one_line_with_the_run_saved(tmp_path, monkeypatch,
                                                                                       callback, said):
    """Callbacks run under the contract of every user function: sys.exit, a KeyboardInterrupt of its own or a
    call past its time limit is one line once the run has saved the step the callback followed."""
    from rlvr.api import running

    monkeypatch.setattr(running, "CALLBACK_TIMEOUT_S", 1.0)
    run = grpo(tmp_path, "c", rewards=[reward_fns.digit_share], max_steps=3, callbacks=[callback])
    start = time.monotonic()
    with pytest.raises(UserError) as e:
        run.train()
    assert said in str(e.value) and "at step 1" in str(e.value) and "resume=True" in str(e.value)
    assert paths.latest_checkpoint(tmp_path / "c") == paths.step_dir(tmp_path / "c", 1)
    assert time.monotonic() - start < 60


def test_a_callback_returning_numpys_true_stops_the_run(tmp_path):
    import numpy as np

    run = grpo(tmp_path, "np", rewards=[reward_fns.digit_share], max_steps=3, callbacks=[lambda s, m: np.bool_(s == 1)])
    assert run.train()["stopped_at"] == 1


class Counting:
    """A stateful reward: it holds a lock (which no copy can take) and counts its calls."""

    def __init__(self):
        self.lock, self.calls = threading.Lock(), 0

    def __call__(self, completions, **kwargs):
        with self.lock:
            self.calls += 1
        return [1.0] * len(completions)


def test_a_stateful_reward_is_the_object_given_not_a_copy(tmp_path):
    counting = Counting()
    grpo(tmp_path, "stateful", rewards=[counting], max_steps=1).train()
    assert counting.calls > 0


def test_python_mistakes_about_folders_and_rewards_are_one_line(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UserError, match=r"output_dir .*a-file is a file: give a folder"):
        grpo(tmp_path, "a-file", rewards=[reward_fns.digit_share], max_steps=1).train()
    with pytest.raises(UserError, match=r"output_dir .*a-file is a file: give a folder"):
        evaluate_model("tiny", ROWS, output_dir=tmp_path / "a-file", samples=1)
    with pytest.raises(UserError, match=r"^reward=42 \(int\) is no reward: give a function"):
        evaluate_model("tiny", ROWS, reward=42, output_dir=tmp_path / "e", samples=1)

    def read_only(self, resume):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(GRPO, "_write_inputs", read_only)
    with pytest.raises(UserError, match=r"cannot write into .*ro \(Read-only file system\): give an output_dir"):
        grpo(tmp_path, "ro", rewards=[reward_fns.digit_share], max_steps=1).train()


def test_an_endless_stream_is_evaluated_up_to_its_limit_or_refused(tmp_path):
    """evaluate_model on an IterableDataset that never ends: limit=N takes its first N problems; without a limit,
    one line asks for one (it wrote 10 million rows before)."""
    import itertools

    def endless():
        for a in itertools.count():
            yield {"prompt": f"What is {a % 10} + 1?", "answer": str(a % 10 + 1)}

    stream = datasets.IterableDataset.from_generator(endless)
    with pytest.raises(UserError, match=r"the data is a stream \(IterableDataset\), which may not end: give limit=N"):
        evaluate_model("tiny", stream, output_dir=tmp_path / "no-limit", samples=1)
    results = evaluate_model("tiny", stream, limit=3, output_dir=tmp_path / "e", samples=1, threads=1,
                             generation={"max_new_tokens": 4})
    assert results["problems"] == 3
    assert len((tmp_path / "e" / "inputs" / "eval.jsonl").read_text().splitlines()) == 3


def test_a_tokenizer_with_more_tokens_than_the_models_embeddings_is_one_line(tmp_path):
    """Accepted before, then a 116-line IndexError at the first rollout (and saved, so a resume failed alike)."""
    from rlvr.models.loading import build_tiny_model

    model, tokenizer = build_tiny_model(0)
    tokenizer.add_tokens([f"<extra_{i}>" for i in range(8)])
    with pytest.raises(UserError, match=r"the tokenizer of the given model has \d+ tokens but its model's embeddings "
                                        r"have \d+ rows: call model.resize_token_embeddings"):
        grpo(tmp_path, "vocab", model=model, tokenizer=tokenizer, rewards=[reward_fns.digit_share], max_steps=1).train()
    assert not (tmp_path / "vocab" / "inputs" / "model").exists()
