"""Sampling ahead on 2 ranks (DDP): each rank's worker samples its share of batch t with the weights of step
t − k, agreeing with the other ranks' workers (the curriculum's pass rates, dynamic sampling's rounds) in a
process group of its own; staleness 0 is the synchronous 2-rank run bit for bit, and staleness 1 resumed is
the unbroken run."""

import json
import shutil
import sys

import torch
from safetensors.torch import load_file

from ..train.test_step import TINY
from .launching import run_ranks
from .test_trainer import CHECKED, RUN

# the 2-rank checks' settings: dynamic sampling and the curriculum, whose decisions the ranks' workers agree on
SETTINGS = [*RUN, *CHECKED[len(TINY):], "eval_before=false", "eval_after=false", "threads=1"]


def train(run, *extra):
    sets = [a for kv in [*SETTINGS, *extra] for a in ("--set", kv)]
    done = run_ranks([sys.executable, "-m", "rlvr", "train", "--nproc", "2", *sets, "--output-dir", str(run)],
                     timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]


def resume(run, steps, nproc=2):
    done = run_ranks([sys.executable, "-m", "rlvr", "train", "--nproc", str(nproc), "--resume", str(run),
                      "--max-steps", str(steps)], timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]


def same(a, b, step=3):
    wa, wb = (load_file(r / "checkpoints" / f"step-{step:06d}" / "model" / "model.safetensors") for r in (a, b))
    ma, mb = ([json.loads(x) for x in (r / "metrics.jsonl").read_text().splitlines()] for r in (a, b))
    return (all(torch.equal(wa[k], wb[k]) for k in wa)
            and [(m["reward/mean"], m["loss"]) for m in ma] == [(m["reward/mean"], m["loss"]) for m in mb])


def test_two_ranks_sampling_ahead(tmp_path):
    train(tmp_path / "sync", "max_steps=3")
    train(tmp_path / "k0", "max_steps=3", "sampling.max_staleness=0")
    assert same(tmp_path / "sync", tmp_path / "k0")
    train(tmp_path / "k1", "max_steps=3", "sampling.max_staleness=1", "save_every=1", "keep_checkpoints=0")
    assert not same(tmp_path / "sync", tmp_path / "k1")
    stale = [json.loads(x)["async/staleness_max"] for x in (tmp_path / "k1" / "metrics.jsonl").read_text().splitlines()]
    assert stale == [0.0, 1.0, 1.0]
    # resumed from the checkpoint of step 2 (which keeps batch 2, sampled ahead with step 1's weights): the same run
    shutil.copytree(tmp_path / "k1", tmp_path / "k1-resumed")
    shutil.rmtree(tmp_path / "k1-resumed" / "checkpoints" / "step-000003")
    resume(tmp_path / "k1-resumed", 3)
    assert same(tmp_path / "k1", tmp_path / "k1-resumed")
    # at another world size the ranks' shares of the batch sampled ahead differ: it is sampled again, with the
    # checkpoint's weights (no older ones exist any more)
    train(tmp_path / "k1-one", "max_steps=2", "sampling.max_staleness=1")
    resume(tmp_path / "k1-one", 3, nproc=1)
    last = [json.loads(x) for x in (tmp_path / "k1-one" / "metrics.jsonl").read_text().splitlines()][-1]
    assert last["step"] == 3 and last["async/staleness_max"] == 0.0
