"""Checkpoints: a run stopped after step k and resumed ends with exactly the unbroken run's weights."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.cli import main
from rlvr.config import TrainConfig
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.run.directory import resume_config
from rlvr.run.loop import run_training

from .test_step import DIGITS, tiny_config

# one thread: bitwise equality is what one thread's kernels give; at two threads the curriculum+dynamic case
# failed 5 times in 5 on this 2-core machine while two training runs used both cores (and passed unloaded)
STEPS = ["threads=1", "optim.schedule=cosine", "optim.warmup_steps=1", "algorithm.updates_per_batch=2",
         "eval_before=false", "eval_after=false"]


COARSE = f"rewards=[{{name: '{Path(__file__).parent / 'reward_fns.py'}:has_digit', correctness: true}}]"
CURRICULUM = [COARSE, "data.curriculum=true", "sampling.dynamic_sampling=true", "sampling.max_sampling_rounds=3"]


@pytest.mark.parametrize("extra", [[DIGITS], CURRICULUM, [DIGITS, "algorithm.ref_refresh_steps=1"]],
                         ids=["shuffled", "curriculum+dynamic", "refreshed reference"])
def test_resumed_run_equals_unbroken_run(tmp_path, extra):
    train_grpo(tiny_config(tmp_path / "a", *extra, *STEPS, steps=4))
    config = tiny_config(tmp_path / "b", *extra, *STEPS, steps=4)
    # = Ctrl-C at step 2
    result = train_grpo(config, on_step_end=lambda step, m, stop: stop.request_stop() if step == 2 else None)
    assert result["stopped_at"] == 2
    run_b = tmp_path / "b" / "run"
    assert paths.latest_checkpoint(run_b).name == "step-000002"
    # a session killed after logging step 3 but before checkpointing it: its lines are dropped on resume
    with (run_b / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 3, "reward/mean": 99.0, "lr": 0.0}) + "\n" + '{"step": 3, "rew')

    train_grpo(resume_config(TrainConfig, run_b), resume=True)
    unbroken, resumed = (load_file(paths.latest_checkpoint(run) / "model" / "model.safetensors")
                         for run in (tmp_path / "a" / "run", run_b))
    assert paths.latest_checkpoint(run_b).name == "step-000004"
    for name, p in unbroken.items():
        assert torch.equal(p, resumed[name]), name
    metrics_a = [json.loads(x) for x in (tmp_path / "a" / "run" / "metrics.jsonl").read_text().splitlines()]
    metrics_b = [json.loads(x) for x in (run_b / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics_b] == [1, 2, 3, 4]
    for a, b in zip(metrics_a, metrics_b):
        assert a["reward/mean"] == b["reward/mean"] and a["lr"] == b["lr"]
    if extra is CURRICULUM:  # the coarse reward leaves groups without spread: resampling happened
        assert max(m["sampling/rounds"] for m in metrics_a) > 1


def test_checkpoint_is_loadable_by_transformers(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = tiny_config(tmp_path, "eval_before=false", "eval_after=false", steps=1)
    trainer = Trainer(config)
    run_training(trainer)
    path = paths.latest_checkpoint(tmp_path / "run")
    model = AutoModelForCausalLM.from_pretrained(path / "model")
    tokenizer = AutoTokenizer.from_pretrained(path / "model")
    for p, q in zip(trainer.policy.model.parameters(), model.parameters()):
        assert torch.equal(p, q)
    assert tokenizer("12").input_ids == trainer.tokenizer("12").input_ids
    assert (path / "config.yaml").is_file() and (path / "trainer.pt").is_file()


def test_half_written_checkpoints_are_ignored(tmp_path):
    train_grpo(tiny_config(tmp_path, "eval_before=false", "eval_after=false", steps=1))
    root = tmp_path / "run" / "checkpoints"
    # a crash mid-write leaves only a temporary directory, never a step-N one
    (root / ".step-000009.tmp-123").mkdir()
    (root / ".step-000009.tmp-123" / "trainer.pt").write_bytes(b"partial")
    assert paths.latest_checkpoint(tmp_path / "run").name == "step-000001"


def test_resume_errors_are_clear(tmp_path):
    with pytest.raises(UserError, match="no config.yaml"):
        resume_config(TrainConfig, tmp_path)
    (tmp_path / "config.yaml").write_text("max_steps: 1\n")
    with pytest.raises(UserError, match="no complete checkpoint"):
        resume_config(TrainConfig, tmp_path)


def test_a_throwing_reward_stops_with_one_line_and_keeps_progress(tmp_path):
    from rlvr.rewards import RewardSpec

    from .reward_fns import explode

    trainer = Trainer(tiny_config(tmp_path, DIGITS, "eval_before=false", steps=3))

    def break_reward(step, metrics, stop):
        if step == 1:
            trainer.parts.rewards[0] = RewardSpec("my_rewards:explode", explode)

    with pytest.raises(UserError) as e:
        run_training(trainer, on_step_end=break_reward)
    assert "'my_rewards:explode' raised RuntimeError" in str(e.value) and "\n" not in str(e.value)
    assert paths.latest_checkpoint(tmp_path / "run").name == "step-000001"  # the finished step was saved


def test_a_fresh_run_never_mixes_with_an_old_one(tmp_path):
    """Over a checkpointed run a fresh Trainer refuses (its checkpoints would be skipped at the old
    run's steps); over a run that died before its first checkpoint it starts clean."""
    config = tiny_config(tmp_path, DIGITS, "eval_before=false", "eval_after=false", steps=1)
    train_grpo(config)
    with pytest.raises(UserError, match="already holds a run: continue it with --resume"):
        train_grpo(config)
    run = Path(config.output_dir)
    shutil.rmtree(run / "checkpoints")
    (run / "samples.jsonl").write_text('{"stale": true}\n')
    train_grpo(config)
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1]
    assert not (run / "samples.jsonl").exists()  # removed, and not rewritten (sample_every=0)


def test_overwrite_starts_afresh_over_a_checkpointed_run(tmp_path, capsys):
    """--overwrite (overwrite=True) deletes the run the directory holds and starts a new one there: its
    metrics and checkpoints are the new run's alone; with --resume it is refused."""
    config = tiny_config(tmp_path, DIGITS, "eval_before=false", "eval_after=false", steps=2)
    train_grpo(config)
    run = Path(config.output_dir)
    (run / "checkpoints" / "step-000009").mkdir()  # (a step the new run never reaches: gone with the old run)
    args = ["train", "--config", str(run / "config.yaml"), "--output-dir", str(run), "--max-steps", "1"]
    assert main(args) == 2 and "start afresh over it with --overwrite" in capsys.readouterr().err
    # starting from the run's own model: afresh would delete it before it loads (the run was lost so)
    for own in (run, run / "checkpoints" / "step-000002" / "model"):
        assert main([*args, "--overwrite", "--set", f"model.name={own}"]) == 2
        assert (f"cannot start afresh over {run}: the model to start from, {own}, is the run's own, which starting "
                "afresh deletes; start from it in another --output-dir") in capsys.readouterr().err
        assert (run / "checkpoints" / "step-000002" / "model").is_dir()
    assert main([*args, "--overwrite"]) == 0
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000001"]
    assert main(["train", "--resume", str(run), "--overwrite"]) == 2
    assert "drop --config/--output-dir/--overwrite" in capsys.readouterr().err


def test_evaluations_belong_to_the_weights_they_measure(tmp_path):
    """A finished run extended with --resume measures its new weights after training (never an earlier
    result), and a fresh run over a run without checkpoints ignores the old run's evaluation file."""
    config = tiny_config(tmp_path, DIGITS, "eval_before=true", "eval_after=true", steps=1)
    run = Path(config.output_dir)
    first = train_grpo(config)
    assert first["before"]["step"] == 0 and first["after"]["step"] == 1
    extended = train_grpo(resume_config(TrainConfig, run, ["max_steps=2"]), resume=True)
    assert extended["steps"] == 2 and extended["after"]["step"] == 2 and extended["before"] == first["before"]
    assert json.loads((run / "summary.json").read_text())["after"]["step"] == 2

    shutil.rmtree(run / "checkpoints")
    (run / "eval_after.json").write_text(json.dumps({"strict": {"mean": 0.99}, "lenient": {"mean": 0.99}}))
    again = train_grpo(config)
    assert again["after"]["step"] == 1 and again["after"]["lenient"]["mean"] == first["after"]["lenient"]["mean"]
    assert not (run / "eval_after.json").exists()


def test_two_processes_never_write_one_run_directory(tmp_path):
    import fcntl

    config = tiny_config(tmp_path, DIGITS, "eval_before=false", "eval_after=false", steps=1)
    run = Path(config.output_dir)
    run.mkdir(parents=True)
    with open(run / ".rlvr.lock", "a+") as other:  # another process's lock (flock is per open file)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.write("4242")
        other.flush()
        with pytest.raises(UserError, match=r"in use by another rlvr process \(pid 4242\)"):
            train_grpo(config)
    assert paths.latest_checkpoint(run) is None
    train_grpo(config)  # released: the run goes ahead
    assert paths.latest_checkpoint(run).name == "step-000001"


def test_a_run_that_fails_to_start_leaves_no_folder(tmp_path):
    config = tiny_config(tmp_path, DIGITS, "eval_before=false", "data.train=no/such.jsonl", steps=1)
    with pytest.raises(UserError):
        train_grpo(config)
    assert not Path(config.output_dir).exists()


def test_a_folder_of_another_kind_is_never_emptied(tmp_path):
    """An `rlvr eval` output (summary.json, samples.jsonl, no config.yaml) given as --output-dir is refused,
    and left untouched."""
    folder = tmp_path / "eval_output"
    folder.mkdir()
    (folder / "samples.jsonl").write_text('{"id": "gsm8k/0"}\n')
    (folder / "summary.json").write_text("{}")
    config = tiny_config(tmp_path, DIGITS, "eval_before=false", "eval_after=false", f"output_dir={folder}", steps=1)
    with pytest.raises(UserError, match="is not a run directory"):
        train_grpo(config)
    assert (folder / "samples.jsonl").read_text() == '{"id": "gsm8k/0"}\n'


def test_a_full_disk_stops_with_one_line_and_keeps_the_earlier_checkpoint(tmp_path):
    import errno

    trainer = Trainer(tiny_config(tmp_path, DIGITS, "save_every=1", "eval_before=false", "eval_after=false", steps=3))

    def fill_the_disk(folder):
        (folder / "model").mkdir()
        (folder / "model" / "model.safetensors").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    def after(step, metrics, stop):  # called before the step's checkpoint is saved
        if step == 2:
            trainer.write_checkpoint = fill_the_disk

    with pytest.raises(UserError) as e:
        run_training(trainer, on_step_end=after)
    run = tmp_path / "run"
    assert str(e.value).startswith(f"no space left on the disk of {run} to save step 2") and "\n" not in str(e.value)
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["step-000001"]  # the half-written copy is gone
    assert load_file(run / "checkpoints" / "step-000001" / "model" / "model.safetensors")


def test_a_real_full_disk_is_recognised_from_torch_save(small_disk):
    from rlvr.run.checkpoint import save_checkpoint

    save = lambda step, numbers: save_checkpoint(  # noqa: E731
        small_disk, step, write=lambda folder: None, state={"x": torch.zeros(numbers)}, config=TrainConfig())
    save(1, 1000)
    with pytest.raises(UserError, match="^no space left on the disk"):
        save(2, 2_000_000)  # 8 MB: torch reports only "unexpected pos"
    assert [p.name for p in (small_disk / "checkpoints").iterdir()] == ["step-000001"]
    kept = torch.load(small_disk / "checkpoints" / "step-000001" / "trainer.pt", weights_only=False)
    assert kept["x"].numel() == 1000


def test_an_optimizer_state_of_earlier_versions_keyed_by_position_still_loads(tmp_path):
    """Checkpoints written before states were keyed by parameter name hold the optimizer's own state dict."""
    from rlvr.distributed.parallel import load_optimizer_state, optimizer_state

    trained = Trainer(tiny_config(tmp_path / "a", DIGITS, "algorithm.beta=0"))
    trained.step()
    fresh = Trainer(tiny_config(tmp_path / "b", DIGITS, "algorithm.beta=0"))
    load_optimizer_state(fresh.policy.model, fresh.optimizer, trained.optimizer.state_dict())  # the old format
    saved, loaded = (optimizer_state(t.policy.model, t.optimizer)["state"] for t in (trained, fresh))
    assert set(loaded) == {n for n, _ in fresh.policy.model.named_parameters()}
    for name, moments in saved.items():
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(loaded[name][key], moments[key]), (name, key)


@pytest.mark.parametrize("keep, kept", [(2, [3, 4]), (0, [1, 2, 3, 4])])
def test_the_newest_checkpoints_are_kept(tmp_path, keep, kept):
    train_grpo(tiny_config(tmp_path, DIGITS, "save_every=1", f"keep_checkpoints={keep}", "eval_before=false",
                           "eval_after=false", steps=4))
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == [f"step-{s:06d}" for s in kept]


def test_an_optimizer_that_took_no_step_is_saved_and_restored_without_one():
    """Every step so far skipped (no reward signal): saving must not give the optimizer a state of one zero step
    (torch's get_optimizer_state_dict does), nor loading (set_optimizer_state_dict), or the next real step's bias
    correction differs from the unbroken run's."""
    from rlvr.distributed.parallel import load_optimizer_state, optimizer_state

    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.5)
    optimizer.param_groups[0]["lr"] = 0.25  # (where the schedule had moved it)
    saved = optimizer_state(model, optimizer)
    assert saved["state"] == {} and optimizer.state == {} and saved["param_groups"][0]["lr"] == 0.25
    fresh = torch.optim.AdamW(model.parameters(), lr=0.5)
    load_optimizer_state(model, fresh, saved)
    assert fresh.state == {} and fresh.param_groups[0]["lr"] == 0.25


def test_a_resume_refuses_what_decides_the_data_samples_and_rewards_and_says_any_other_change(tmp_path, capsys):
    """Resumed with another seed, held-out size, batch shape or control, a run measured its "after" on other
    problems than its "before" (a paired gain of unpaired numbers), crashed at its end, or became half a control
    run, without a word. Those are refused; another learning rate is taken, and said; how far the run goes and how
    it is saved or measured change quietly."""
    config = tiny_config(tmp_path, DIGITS, "eval_before=false", "eval_after=false", steps=1)
    train_grpo(config)
    run = Path(config.output_dir)
    resume = ["train", "--resume", str(run), "--max-steps", "2"]
    for change, said in ((["--set", "seed=5"], "seed=5 (the run's is 0)"),
                         (["--set", "data.eval_size=6"], "data.eval_size=6 (the run's is 4)"),
                         (["--set", "sampling.batch_size=16"], "sampling.batch_size=16 (the run's is 8)"),
                         (["--control", "random"], "control='random' (the run's is 'none')")):
        assert main([*resume, *change]) == 2
        err = capsys.readouterr().err
        assert f"cannot resume {run} with {said}" in err and "start a new run from its model instead" in err
    assert main([*resume, "--set", "optim.lr=0.002", "--set", "eval_after=false"]) == 0
    err = capsys.readouterr().err
    assert f"rlvr: resuming {run} with other settings: optim.lr=0.002 (the run's: " in err and "eval_after" not in err


def test_a_run_resumed_from_another_folder_than_its_relative_data_paths_says_where_to_resume_from(tmp_path,
                                                                                                  monkeypatch, capsys):
    """`data source 'train.jsonl' does not exist`, of a file that does exist where the run was started."""
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    (start / "train.jsonl").write_text("".join(json.dumps({"prompt": f"{i} + 1 =", "answer": str(i + 1)}) + "\n"
                                               for i in range(8)))
    monkeypatch.chdir(start)
    assert main(["train", "--set", "model.name=tiny", "--set", "data.train=train.jsonl", "--set", "data.eval_size=2",
                 "--set", "sampling.group_size=2", "--set", "sampling.batch_size=4", "--set",
                 "generation.max_new_tokens=4", "--set", "eval_before=false", "--set", "eval_after=false",
                 "--max-steps", "1", "--output-dir", str(tmp_path / "run")]) == 0
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "run"), "--max-steps", "2"]) == 2
    assert (f"data source 'train.jsonl' is not in this folder ({elsewhere}): the paths in a run's config are relative "
            f"to the folder it was started from; resume {tmp_path / 'run'} from there") in capsys.readouterr().err
    monkeypatch.chdir(start)
    assert main(["train", "--resume", str(tmp_path / "run"), "--max-steps", "2"]) == 0
