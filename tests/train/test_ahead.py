"""Sampling ahead (sampling.max_staleness): which weights sample which batch follows the step counters, so
k = 0 is the synchronous run bit for bit and k = 1 is itself when repeated or resumed; a failing or stalled
worker ends the run in one line with the last checkpoint kept."""

import json
import re
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import TrainConfig
from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo
from rlvr.run.directory import resume_config

from .test_step import DIGITS, tiny_config

ONE_THREAD = ["threads=1", "eval_before=false", "eval_after=false", "algorithm.beta=0.04"]
CURRICULUM = ["data.curriculum=true", "sampling.dynamic_sampling=true", "sampling.max_sampling_rounds=2"]


def weights(run: Path) -> dict[str, torch.Tensor]:
    """The latest checkpoint's weights (a LoRA run's: its adapters)."""
    return {k: v for f in sorted((paths.latest_checkpoint(run) / "model").glob("*.safetensors"))
            for k, v in load_file(f).items()}


def logged(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def same_run(a: Path, b: Path, keys=("reward/mean", "loss", "kl", "grad_norm", "entropy")) -> bool:
    wa, wb = weights(a), weights(b)
    assert wa and wa.keys() == wb.keys()
    same_weights = all(torch.equal(wa[k], wb[k]) for k in wa)
    return same_weights and [[m[k] for k in keys] for m in logged(a)] == [[m[k] for k in keys] for m in logged(b)]


def hang_from_batch(first: int, on_hang=lambda: None):
    """digit_share until the `first`-th batch it scores (one call per batch), which it never returns from:
    which batch hangs does not depend on how far the worker got when the test looked."""
    import itertools

    from .reward_fns import digit_share

    calls = itertools.count(1)

    def reward(completions, **kwargs):
        if next(calls) >= first:
            on_hang()
            time.sleep(3600)
        return digit_share(completions)
    return reward


def train(tmp_path: Path, name: str, *extra: str, steps: int = 4, **kwargs):
    return train_grpo(tiny_config(tmp_path / name, DIGITS, *ONE_THREAD, *extra, steps=steps), **kwargs)


LORA = ["model.lora.rank=4"]
GAME = ["environment.name=guess_number", "environment.params.max_turns=2", "environment.max_tokens=200",
        "rewards=[{name: environment_reward}]", "generation.max_new_tokens=6"]


AGENT = [f"environment.name={Path(__file__).parents[1] / 'harness' / 'agents.py'}:rewrites_history",
         "rewards=[{name: agent_reward}]", "generation.max_new_tokens=6"]


@pytest.mark.parametrize("extra", [[], LORA, GAME, AGENT], ids=["full", "lora", "environment", "agent"])
def test_staleness_0_through_the_worker_is_the_synchronous_run(tmp_path, extra, monkeypatch):
    if extra is GAME:  # (any letter ends a message of the random tiny model, so that games run several turns)
        from .test_environments import short_messages
        short_messages.__wrapped__(monkeypatch)
    train(tmp_path, "sync", *extra)
    train(tmp_path, "ahead", "sampling.max_staleness=0", *extra)
    assert same_run(tmp_path / "sync" / "run", tmp_path / "ahead" / "run")
    assert [m["async/staleness_max"] for m in logged(tmp_path / "ahead" / "run")] == [0.0] * 4
    if extra is GAME:
        assert max(m["env/turns"] for m in logged(tmp_path / "ahead" / "run")) > 1


@pytest.mark.parametrize("extra", [[], CURRICULUM, ["algorithm.updates_per_batch=2", "algorithm.ref_refresh_steps=2"]],
                         ids=["shuffled", "curriculum+dynamic", "mu=2+refreshed reference"])
def test_staleness_1_is_itself_repeated_and_resumed(tmp_path, extra):
    train(tmp_path, "a", "sampling.max_staleness=1", *extra)
    train(tmp_path, "b", "sampling.max_staleness=1", *extra)
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert same_run(a, b)
    # batch 1 is sampled with step 0's weights, batch t with step t − 1's: trained 1 version late
    assert [m["async/staleness_max"] for m in logged(a)] == [0.0, 1.0, 1.0, 1.0]
    stopped = train(tmp_path, "c", "sampling.max_staleness=1", *extra,
                    on_step_end=lambda step, m, stop: stop.request_stop() if step == 2 else None)
    assert stopped["stopped_at"] == 2
    c = tmp_path / "c" / "run"
    state = torch.load(paths.latest_checkpoint(c) / paths.TRAINER_STATE, weights_only=False)
    assert [s.batch for s in state["ahead"]["pending"][0]] == [2]  # the batch sampled ahead is kept with it
    train_grpo(resume_config(TrainConfig, c), resume=True)
    assert same_run(a, c)


def test_ctrl_c_saves_what_was_sampled_ahead_and_the_resumed_run_is_the_unbroken_one(tmp_path):
    import os
    import signal

    train(tmp_path, "a", "sampling.max_staleness=1")
    ctrl_c = lambda step, m, stop: os.kill(os.getpid(), signal.SIGINT) if step == 2 else None  # noqa: E731
    assert train(tmp_path, "b", "sampling.max_staleness=1", on_step_end=ctrl_c)["stopped_at"] == 2
    train_grpo(resume_config(TrainConfig, tmp_path / "b" / "run"), resume=True)
    assert same_run(tmp_path / "a" / "run", tmp_path / "b" / "run")


@pytest.mark.parametrize("k", [1, 100])
def test_the_worker_samples_no_batch_past_the_runs_last(tmp_path, monkeypatch, k):
    """max_steps 3: three batches sampled and scored (a paid reward pays for three), none kept in the last
    checkpoint, whatever k; the run as unbroken as ever."""
    import rlvr.rl.rollouts as module
    from rlvr.run.checkpoint import load_state

    real, scored = module.score_rollout, []
    monkeypatch.setattr(module, "score_rollout", lambda *args: scored.append(1) or real(*args))
    train(tmp_path, "run", f"sampling.max_staleness={k}", "sampling.overlap_rewards=false", steps=3)
    assert len(scored) == 3
    assert load_state(paths.latest_checkpoint(tmp_path / "run" / "run"))["ahead"]["pending"] == [[]]


def test_a_run_resumed_without_sampling_ahead_trains_the_batches_it_had_sampled_ahead(tmp_path, monkeypatch):
    """Stopped at step 2 with batch 2 sampled ahead, resumed with max_staleness null: batch 2's prompts are
    sampled again and trained at step 3, as the unbroken run trains them (no batch skipped)."""
    from rlvr.rl.prompts import PromptStream

    drawn, real = [], PromptStream.next_batch
    monkeypatch.setattr(PromptStream, "next_batch", lambda self: drawn.append(real(self)) or drawn[-1])
    train(tmp_path, "a", "sampling.max_staleness=1")
    unbroken, drawn[:] = list(drawn), []
    train(tmp_path, "b", "sampling.max_staleness=1", on_step_end=lambda step, m, stop: stop.request_stop()
          if step == 2 else None)
    drawn[:] = []
    train_grpo(resume_config(TrainConfig, tmp_path / "b" / "run", ["sampling.max_staleness=null"]), resume=True)
    assert len(unbroken) == 4 and drawn == unbroken[2:]


def test_staleness_changes_what_is_trained(tmp_path):
    train(tmp_path, "sync")
    train(tmp_path, "ahead", "sampling.max_staleness=1")
    assert not same_run(tmp_path / "sync" / "run", tmp_path / "ahead" / "run")
    # the stale batches' ratio is against the weights that sampled them: π_θ moved since, so it is not 1
    # and gets clipped (synchronously, with one update per batch, π_old is π_θ itself: a ratio of exactly 1)
    ahead, sync = logged(tmp_path / "ahead" / "run"), logged(tmp_path / "sync" / "run")
    assert all(m["sampler/logp_abs_diff_mean"] > 1e-4 for m in ahead[1:])
    clipped = lambda ms: sum(m["clip_low_fraction"] + m["clip_high_fraction"] for m in ms)  # noqa: E731
    assert clipped(sync) == 0 and clipped(ahead[:1]) == 0 and clipped(ahead[1:]) > 0


def test_a_reward_that_throws_in_the_worker_is_one_line_and_the_checkpoint_stays(tmp_path, monkeypatch):
    calls = {"n": 0}
    import rlvr.rl.rollouts as module

    real = module.score_rollout

    def failing(*args):
        calls["n"] += 1
        if calls["n"] == 4:  # the fourth batch: step 4's
            raise UserError("reward 'digit_share' failed on row 1: ValueError: boom")
        return real(*args)
    monkeypatch.setattr(module, "score_rollout", failing)
    with pytest.raises(UserError, match="boom"):
        train(tmp_path, "run", "sampling.max_staleness=1", "sampling.overlap_rewards=false", steps=6)
    run = tmp_path / "run" / "run"
    assert paths.latest_checkpoint(run).name == "step-000003"  # the finished steps' work is saved


def test_a_worker_that_dies_is_one_line_and_the_checkpoint_stays(tmp_path, monkeypatch):
    from rlvr.samplers.local import CopySampler

    real, calls = CopySampler.sample, {"n": 0}

    def dying(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("engine lost")
        return real(self, *args, **kwargs)
    monkeypatch.setattr(CopySampler, "sample", dying)
    with pytest.raises(UserError, match="the rollout worker failed while sampling batch 3: RuntimeError: engine lost"):
        train(tmp_path, "run", "sampling.max_staleness=1", steps=5)
    assert paths.latest_checkpoint(tmp_path / "run" / "run").name == "step-000002"


def test_a_stalled_worker_ends_the_run_within_its_deadline(tmp_path, monkeypatch):
    import rlvr.rl.rollouts as module

    real, calls = module.score_rollout, {"n": 0}

    def stalling(*args):
        calls["n"] += 1
        if calls["n"] == 3:
            time.sleep(60)
        return real(*args)
    monkeypatch.setattr(module, "score_rollout", stalling)
    start = time.monotonic()
    with pytest.raises(UserError, match="has not sampled batch 3 in 3 s .*stalled"):
        train(tmp_path, "run", "sampling.max_staleness=1", "sampling.overlap_rewards=false",
              "sampling.worker_timeout_s=3", steps=6)
    assert time.monotonic() - start < 50


def test_what_it_does_not_combine_with_yet_is_one_line(tmp_path):
    config = tiny_config(tmp_path, "sampling.max_staleness=1", "distributed.strategy=fsdp")
    with pytest.raises(UserError, match="needs distributed.strategy ddp"):
        config.check_ranks(2)
    config.check_ranks(1)  # (one process shards nothing)


def test_what_it_does_not_combine_with_is_said_once_before_the_ranks_start(tmp_path, capsys, monkeypatch):
    import rlvr.cli

    monkeypatch.setattr(rlvr.cli, "relaunch", lambda *a: pytest.fail("torchrun was started"))
    code = rlvr.cli.main(["train", "--nproc", "2", "--set", "model.name=tiny", "--set", "sampling.max_staleness=1",
                          "--set", "distributed.strategy=fsdp", "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("needs distributed.strategy ddp") == 1 and len(err.strip().splitlines()) == 1


def test_closing_interrupts_a_batch_being_sampled_at_its_next_decoding_step():
    """A run that is over gives up the batch its worker is sampling (nobody will train on it): the worker's
    copy stops at its next forward pass, and the thread is gone when close returns (a daemon thread left
    inside CUDA when the process exits can abort it)."""
    import threading

    from rlvr.models import build_tiny_model
    from rlvr.rl.ahead import RolloutsAhead
    from rlvr.samplers.local import CopySampler

    model, tokenizer = build_tiny_model(seed=0)
    sampler = CopySampler(model, tokenizer, torch.no_grad)
    sampling, steps = threading.Event(), []

    def produce(batch, s):  # (decoding that would go on for minutes)
        sampling.set()
        for _ in range(100_000):
            s.model(input_ids=torch.tensor([[1, 2, 3]]))
            steps.append(1)
    ahead = RolloutsAhead(sampler, produce, dict, max_staleness=1, first_batch=0, load=lambda weights, version: None)
    ahead.publish(0, [])
    assert sampling.wait(30)
    started = time.monotonic()
    ahead.close()
    assert not ahead.thread.is_alive() and time.monotonic() - started < 5 and len(steps) < 100_000


def test_a_reward_past_its_limit_in_the_worker_ends_the_run_in_seconds_with_the_finished_steps_saved(tmp_path):
    """Off the main thread nothing can interrupt a reward: the trainer waiting for the worker says so once the
    reward is past its timeout_s, and the finished steps are saved (not after sampling.worker_timeout_s)."""
    from rlvr.grpo.trainer import Trainer
    from rlvr.rewards import RewardSpec
    from rlvr.run.loop import run_training

    trainer = Trainer(tiny_config(tmp_path, DIGITS, *ONE_THREAD, "sampling.max_staleness=1",
                                  "sampling.overlap_rewards=false", steps=5))
    name = trainer.parts.rewards[0].name  # (the run's correctness reward: its name stays)
    trainer.parts.rewards[0] = RewardSpec(name, hang_from_batch(3), 1.0, 1.0)
    start = time.monotonic()
    with pytest.raises(UserError, match=re.escape(f"reward function '{name}' did not return within its time limit "
                                                  "of 1 s in the worker sampling ahead")):
        run_training(trainer)
    assert time.monotonic() - start < 30  # (the worker timeout is 1800 s)
    assert paths.latest_checkpoint(tmp_path / "run").name == "step-000002"


def test_ctrl_c_while_the_worker_is_stuck_saves_the_finished_steps_in_seconds(tmp_path):
    """A reward with no limit that never returns in the worker: Ctrl-C gives the waiting step up and saves what
    the finished steps made at once (not after sampling.worker_timeout_s)."""
    import os
    import signal
    import threading

    from rlvr.grpo.trainer import Trainer
    from rlvr.rewards import RewardSpec
    from rlvr.run.loop import run_training

    trainer = Trainer(tiny_config(tmp_path, DIGITS, *ONE_THREAD, "sampling.max_staleness=1",
                                  "sampling.overlap_rewards=false", steps=5))
    ctrl_c_soon = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT)).start
    name = trainer.parts.rewards[0].name
    trainer.parts.rewards[0] = RewardSpec(name, hang_from_batch(3, on_hang=ctrl_c_soon), 1.0, None)
    start = time.monotonic()
    summary = run_training(trainer)
    assert time.monotonic() - start < 30
    assert summary["stopped_at"] == 2
    assert paths.latest_checkpoint(tmp_path / "run").name == "step-000002"
