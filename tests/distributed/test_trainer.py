"""The GRPO trainer on 2 ranks (torchrun, gloo): each rank samples its own whole groups of the global
batch the prompt stream draws for all, dynamic-sampling rounds and the curriculum stay in lockstep,
and the batch-std advantages and the step's metrics are those one process computes on the global
batch. Run through the command line, rank 0 alone writes the run's files, and a run resumes at
another world size with the same data order."""

import json
import math
import signal
import socket
import subprocess
import sys

import pytest
import torch

from rlvr.config import load_config
from rlvr.distributed.world import World, shard, unshard
from rlvr.rl.batch import outcome_advantages
from rlvr.rl.dynamic import concat_scored
from rlvr.rl.prompts import PromptStream

from ..train.test_step import REWARD_FNS, TINY
from .launching import ROOT, launch, rank_env, run_ranks, signal_all

HERE = ROOT / "tests" / "distributed"
CHECKED = [*TINY, "sampling.batch_size=16", "generation.max_new_tokens=3", "sampling.dynamic_sampling=true",
           "sampling.max_sampling_rounds=3", "data.curriculum=true", "algorithm.advantage_scale=batch_std",
           "algorithm.beta=0.04", f"rewards=[{{name: '{REWARD_FNS}:digit_share', correctness: true}}]"]


@pytest.fixture(scope="module", params=["ddp", "fsdp"])
def ranks(tmp_path_factory, request):
    tmp = tmp_path_factory.mktemp(request.param)
    code, stderr = launch(["--standalone", "--nproc_per_node", "2", str(HERE / "trainer_worker.py"), str(tmp),
                           *CHECKED, f"output_dir={tmp / 'run'}", f"distributed.strategy={request.param}"],
                          rank_env(), timeout=120)
    assert code == 0, stderr[-4000:]
    return torch.load(tmp / "ranks.pt", weights_only=False)


def test_every_rank_draws_the_same_global_batches_and_samples_its_own_share(ranks):
    first, second = ranks
    assert any(len(step["drawn"]) > 1 for step in first), "dynamic sampling should have needed a second round"
    for mine, theirs in zip(first, second):
        assert mine["drawn"] == theirs["drawn"]  # the same rounds, the same global batches
        for rank, step in enumerate((mine, theirs)):
            assert step["sampled"] == [shard(batch, World(rank=rank, size=2)) for batch in step["drawn"]]
        for batch, a, b in zip(mine["drawn"], mine["sampled"], theirs["sampled"]):
            assert sorted(a + b) == sorted(batch) and not set(a) & set(b)  # whole groups, each on one rank


def test_the_prompt_stream_stays_identical_on_every_rank(ranks):
    for mine, theirs in zip(*ranks):
        assert mine["stream"] == theirs["stream"]
    assert any(rate is not None for rate in ranks[0][-1]["stream"]["pass_rates"])  # the curriculum observed


def test_batch_std_advantages_equal_the_one_process_ones(ranks):
    algo, differs = load_config(None, CHECKED).algorithm, []
    for mine, theirs in zip(*ranks):
        whole = concat_scored([mine["scored"], theirs["scored"]])
        expected = outcome_advantages(whole, algo)[:, 0]
        assert torch.allclose(torch.cat([mine["advantages"], theirs["advantages"]]), expected, atol=1e-6)
        alone = outcome_advantages(mine["scored"], algo)[:, 0]
        differs.append(not torch.allclose(alone, expected[:len(alone)], atol=1e-3))
    assert any(differs)  # a rank's own std would not have done


def test_the_step_metrics_are_those_of_the_global_batch(ranks):
    for mine, theirs in zip(*ranks):
        whole = concat_scored([mine["scored"], theirs["scored"]])
        rewards, lengths = whole.rewards, whole.rollout.lengths.float()
        advantages = torch.cat([mine["advantages"], theirs["advantages"]])
        m = mine["metrics"]
        assert m["reward/mean"] == pytest.approx(float(rewards.mean()), abs=1e-6)
        assert m["reward/std"] == pytest.approx(float(rewards.std(correction=0)), abs=1e-6)
        assert m["completion_length/mean"] == pytest.approx(float(lengths.mean()), abs=1e-6)
        assert m["advantage/abs_mean"] == pytest.approx(float(advantages.abs().mean()), abs=1e-6)
        assert m["sampling/rounds"] == len(mine["drawn"])
        same = {k for k in m if not k.startswith(("time/", "memory/")) and k not in ("step_seconds",
                                                                                    "tokens_per_second")}
        assert all(m[k] == theirs["metrics"][k] or (math.isnan(m[k]) and math.isnan(theirs["metrics"][k]))
                   for k in same)  # every rank logs the same numbers (rank 0 writes them)


def test_ddp_replicas_stay_bitwise_identical(ranks):
    if ranks[0][0]["replica_spread"] is None:
        pytest.skip("FSDP holds shards, not replicas")
    assert [step["replica_spread"] for step in ranks[0]] == [0.0, 0.0]


RUN = [*TINY, "save_every=1", "data.eval_size=4"]


def rlvr_args(*args):
    sets = [a for kv in RUN for a in ("--set", kv)]
    return ["-m", "rlvr", "train", *sets, *args]


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_nproc_runs_rank_0_writes_and_resuming_at_another_world_size_keeps_the_data_order(tmp_path, strategy,
                                                                                          monkeypatch):
    """2 ranks -> 1 process -> 2 ranks; under fsdp with a reference (refreshed) and μ = 2, so that every
    sharded model and the optimizer state go through a checkpoint."""
    MlflowClient = pytest.importorskip("mlflow.tracking").MlflowClient
    run = tmp_path / "run"
    sets = ["--set", f"distributed.strategy={strategy}", "--set", "algorithm.updates_per_batch=2",
            "--set", "algorithm.ref_refresh_steps=2"]
    # rank 0 alone logs to the trackers: one MLflow run, with each step once
    tracked = {**rank_env(), "MLFLOW_TRACKING_URI": (tmp_path / "mlruns").as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true"}
    sets += ["--set", "logging.report_to=[tensorboard, mlflow]"]
    out = run_ranks([sys.executable, *rlvr_args("--nproc", "2", "--max-steps", "2", "--output-dir", str(run),
                                                     *sets)], timeout=180, env=tracked)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.count("run directory:") == 1 and out.stdout.count("before: strict") == 1
    assert [line.count('"step"') for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 1]
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient((tmp_path / "mlruns").as_uri())
    (logged,) = client.search_runs([client.get_experiment_by_name("rlvr").experiment_id])
    assert [m.step for m in client.get_metric_history(logged.info.run_id, "loss")] == [1, 2]
    for nproc, steps in (("1", 3), ("2", 4)):  # 2 ranks -> 1 process -> 2 ranks
        more = run_ranks([sys.executable, "-m", "rlvr", "train", "--nproc", nproc, "--resume", str(run),
                               "--max-steps", str(steps)], timeout=180, env=tracked)
        assert more.returncode == 0, more.stderr[-4000:]
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 4
    last = run / "checkpoints" / "step-000004"
    state = torch.load(last / "trainer.pt", weights_only=False)
    stream = PromptStream(32, 2, 0)
    for _ in range(4):
        stream.next_batch()
    assert state["prompts"] == stream.state_dict()  # the global data order, whatever the world size
    from torch.distributed.checkpoint import FileSystemReader
    from transformers import AutoModelForCausalLM

    # each rank wrote its part: model and optimizer in dcp/ (every parameter's AdamW moments), its RNG
    saved = FileSystemReader(str(last / "dcp")).read_metadata().state_dict_metadata
    assert sorted(p.name for p in (last / "rng").iterdir()) == ["rank0.pt", "rank1.pt"]
    for folder in ("model", "reference"):  # and rank 0 the whole models, whatever held them
        names = {n for n, _ in AutoModelForCausalLM.from_pretrained(last / folder).named_parameters()}
        assert {f"optimizer.state.{n}.exp_avg" for n in names} <= set(saved)
        assert {f"model.{n}" for n in names} <= set(saved)


def test_two_nodes_on_localhost_run_a_step_through_a_c10d_rendezvous(tmp_path):
    """`torchrun --nnodes 2 --nproc_per_node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:PORT` on each
    "node": the two meet at the endpoint, form one world of 2 ranks and train."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = tmp_path / "run"
    node = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "rlvr-test",
            *rlvr_args("--max-steps", "1", "--set", "eval_before=false", "--set", "eval_after=false",
                       "--output-dir", str(run))]
    nodes = [subprocess.Popen(node, env=rank_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for _ in range(2)]
    try:
        results = [p.communicate(timeout=120) for p in nodes]
    finally:
        for p in nodes:
            if p.poll() is None:
                signal_all(p.pid, signal.SIGKILL)
    assert [p.returncode for p in nodes] == [0, 0], results[0][1][-3000:] + results[1][1][-3000:]
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1
    assert sum(out.count("run directory:") for out, _ in results) == 1  # one world, one rank 0


def test_a_sharded_run_resumed_from_its_parts_ends_as_the_unbroken_run(tmp_path):
    """FSDP on 2 ranks, stopped after step 2 and resumed from dcp/ on 2 ranks, ends with the weights of
    the run that never stopped: the shards, AdamW moments, each rank's RNG and the stream all came back."""
    from safetensors.torch import load_file

    sets = ["--set", "distributed.strategy=fsdp", "--set", "eval_before=false", "--set", "eval_after=false"]

    def train(*args):
        done = run_ranks([sys.executable, "-m", "rlvr", "train", "--nproc", "2", *args], timeout=180)
        assert done.returncode == 0, done.stderr[-4000:]

    def last_weights(run):
        return load_file(run / "checkpoints" / "step-000003" / "model" / "model.safetensors")

    train(*rlvr_args(*sets)[3:], "--max-steps", "3", "--output-dir", str(tmp_path / "a"))
    train(*rlvr_args(*sets)[3:], "--max-steps", "2", "--output-dir", str(tmp_path / "b"))
    train("--resume", str(tmp_path / "b"), "--max-steps", "3")
    unbroken, resumed = last_weights(tmp_path / "a"), last_weights(tmp_path / "b")
    for name, weight in unbroken.items():
        assert torch.equal(resumed[name], weight), name


def test_two_ranks_converse_with_environments_and_log_the_global_batchs_conversations(tmp_path):
    run = tmp_path / "run"
    game = ["environment.name=guess_number", "environment.max_tokens=64", "rewards=[{name: environment_reward}]",
            "eval_before=false", "eval_after=false"]
    out = run_ranks([sys.executable, *rlvr_args("--nproc", "2", "--max-steps", "1", "--output-dir", str(run),
                                                     *[a for kv in game for a in ("--set", kv)])], timeout=180)
    assert out.returncode == 0, out.stderr[-4000:]
    (line,) = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert line["env/turns"] >= 1 and "env/guesses" in line


def test_one_and_two_ranks_sample_the_same_completions(tmp_path):
    """One seed per (step, prompt slot, sample index) (rlvr.seeds): a completion does not depend on the rank that
    samples it or on its batch-mates. In the first step (the same weights everywhere) every completion of the
    2-rank run is the 1-rank run's, token for token; in the second, the ranks' gradients were summed in
    another order, and the weights differ in their last bits: measured here, the completions still agree
    (a flipped token would show as a share below 1, which this test reports)."""
    settings = [*TINY, "sampling.batch_size=32", "generation.max_new_tokens=16", "algorithm.beta=0.04",
                f"rewards=[{{name: '{REWARD_FNS}:digit_share'}}]"]
    runs = {}
    for n in (1, 2):
        out = tmp_path / str(n)
        out.mkdir()
        code, stderr = launch(["--standalone", "--nproc_per_node", str(n), str(HERE / "trainer_worker.py"), str(out),
                               *settings, f"output_dir={out / 'run'}"], rank_env(), timeout=120)
        assert code == 0, stderr[stderr.find("Traceback"):][:4000]
        ranks = torch.load(out / "ranks.pt", weights_only=False)
        runs[n] = [unshard([[r["scored"].rollout.completions[i:i + 4]
                             for i in range(0, len(r["scored"].rollout.completions), 4)] for r in step])
                   for step in zip(*ranks)]  # per step: each slot's group, in the order of the whole batch
    first, second = ([a == b for a, b in zip(one, two)] for one, two in zip(runs[1], runs[2]))
    assert all(first), "the first step's completions differ between 1 and 2 ranks"
    print(f"groups identical at 1 and 2 ranks: step 1 {sum(first)}/{len(first)}, step 2 {sum(second)}/{len(second)}")
    assert sum(second) >= len(second) // 2
