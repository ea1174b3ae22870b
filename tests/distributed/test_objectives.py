"""Every objective of docs/objectives.md under 2 ranks (DDP): the step equals one process's on the same global
batch — the batch statistics (REINFORCE++'s and GDPO's normalisation, the entropy quantile) taken over every
rank's part of it, not each rank's own."""

import json
from pathlib import Path

import pytest

from rlvr.config import load_config
from rlvr.grpo.trainer import Trainer

from ..train.test_objectives import OBJECTIVES
from ..train.test_step import DIGITS, TINY
from .launching import launch, rank_env

HERE = Path(__file__).parent
COMMON = [*TINY, "sampling.batch_size=16", "algorithm.updates_per_batch=2", "eval_before=false", "eval_after=false"]


def settings(name):
    extra = OBJECTIVES[name]
    return [*COMMON, *extra, *([] if any(s.startswith("rewards=") for s in extra) else [DIGITS])]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("objectives")
    (tmp / "cases.json").write_text(json.dumps({name: settings(name) for name in OBJECTIVES}))
    code, stderr = launch(["--standalone", "--nproc_per_node", "2", str(HERE / "objectives_worker.py"),
                           str(tmp / "cases.json"), str(tmp)], rank_env(), timeout=300)
    assert code == 0, stderr[stderr.find("Traceback"):][:4000]
    import torch

    return torch.load(tmp / "ranks.pt", weights_only=False)


@pytest.mark.parametrize("name", OBJECTIVES)
def test_two_ranks_take_the_step_one_process_takes(two_ranks, tmp_path, name):
    one = Trainer(load_config(None, [*settings(name), f"output_dir={tmp_path}"])).step().metrics
    two = two_ranks[name]
    for key in ("reward/mean", "reward/std", "completion_length/mean"):  # the same samples (sums in another order)
        assert two[key] == pytest.approx(one[key], rel=1e-6), key
    for key in ("grad_norm", "entropy", "kl"):
        assert two[key] == pytest.approx(one[key], rel=1e-4, abs=1e-7), key
