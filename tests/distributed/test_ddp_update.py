"""Data-parallel GRPO update (DDP and FSDP2 over gloo, 2 ranks launched by torchrun) equals the single-process
update on the same global batch: gradients, grad-norm, weights after one and after three steps of
μ = 2 AdamW updates with clipping active and β > 0, and the statistics, for each loss aggregation,
with the ranks holding unequal shares and numbers of micro-batches. The replicas stay bitwise identical."""

from pathlib import Path

import pytest
import torch

from rlvr.grpo.trainer import Trainer
from rlvr.rl.batch import make_batch, micro_batches
from rlvr.run.policy import Policy

from ..train.test_step import DIGITS, tiny_config
from .ddp_worker import run_update, select_groups
from .launching import launch, rank_env

AGGREGATIONS = ["token_mean", "sequence_mean", "constant"]
HERE = Path(__file__).parent


def run_case(tmp, strategy, mu=2, **overrides):
    """The case (starting weights, the global batch, the ranks' groups, settings) and what the 2 ranks saved."""
    trainer = Trainer(tiny_config(tmp, DIGITS, "sampling.batch_size=16", "algorithm.beta=0.04",
                                  f"algorithm.updates_per_batch={mu}", "algorithm.clip_low=0.05",
                                  "algorithm.clip_high=0.05", "generation.max_new_tokens=16", steps=1))
    scored, _ = trainer.source.take(0)
    a = trainer.config.algorithm
    batch = make_batch(scored, trainer.advantages(scored), policy=trainer.policy, algo=a,
                       micro_batch_tokens=10_000, temperature=1.0)
    budget = int(batch.rollout.lengths[:4].sum() + batch.rollout.prompt_mask[0].sum())  # about one group
    case = {"weights": {n: t.clone() for n, t in trainer.policy.model.state_dict().items()}, "batch": batch,
            "groups": [[0], [1, 2, 3]], "aggregations": AGGREGATIONS, "micro_batch_tokens": budget,
            "algo": {k: getattr(a, k) for k in ("beta", "clip_low", "clip_high", "kl_estimator", "updates_per_batch")},
            "optim": {"lr": 1e-3}, "max_new_tokens": 16, "steps": 3, "strategy": strategy, **overrides}
    torch.save(case, tmp / "case.pt")
    code, stderr = launch(["--standalone", "--nproc_per_node", "2", str(HERE / "ddp_worker.py"), str(tmp / "case.pt"),
                           str(tmp)], rank_env(), timeout=120)
    assert code == 0, stderr[-4000:]
    return case, torch.load(tmp / "ranks.pt", weights_only=False)


@pytest.fixture(scope="module", params=["ddp", "fsdp"])
def case(tmp_path_factory, request):
    return run_case(tmp_path_factory.mktemp(request.param), request.param)


def test_the_ranks_hold_unequal_shares_and_micro_batch_counts(case):
    case, ranks = case
    assert len(set(ranks["micro_batches"])) == 2, ranks["micro_batches"]
    full = select_groups(case["batch"], [0, 1, 2, 3])
    assert torch.equal(full.loss_mask, case["batch"].loss_mask)  # the union of the shares is the batch
    assert len(micro_batches(full.rollout, full.loss_mask, case["micro_batch_tokens"])) > 1


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_two_ranks_equal_one_process_on_the_global_batch(case, aggregation):
    from rlvr.models import build_tiny_model

    case, ranks = case
    model, _ = build_tiny_model(0)
    model.load_state_dict(case["weights"])
    single, weights = run_update(Policy(model, device=torch.device("cpu"), dtype=torch.float32), case["batch"], case,
                                 aggregation)
    ddp = ranks[aggregation]
    assert ddp["replica_spread"] in (0.0, None)  # DDP's replicas are bitwise identical (FSDP's are shards)
    assert single[1]["clip_low_fraction"] + single[1]["clip_high_fraction"] > 0  # clipping is exercised
    for n, p in model.named_parameters():
        # summation order differs between the shares (fp32: gaps up to ~1.2e-5 of a tensor's largest entry
        # were seen), and Adam scales tiny differences up
        assert float((ddp["grads"][n] - p.grad).abs().max()) <= 2e-5 * float(p.grad.abs().max()) + 1e-9, n
    # after one step (μ = 2 updates) and after three; FSDP reduces the gradients in another order (a
    # reduce-scatter of flattened shards), and Adam divides the tiniest gradients by their own size
    sharded = ddp["replica_spread"] is None  # (its gradient norm, too, is summed over the shards)
    # Adam's first steps move a weight by about lr = 1e-3 whatever its gradient's size, so a gradient at the
    # noise level can move it by a visible fraction of that: the bounds are 1% (DDP) and 10% (FSDP) of lr,
    # and a wrong reduction moves most weights by the order of lr
    tolerances = ((0, 1e-4), (2, 2e-4)) if sharded else ((0, 1e-5), (2, 5e-5))
    for step, tolerance in tolerances:
        for n, w in weights[step].items():
            gap = float((ddp["weights"][step][n] - w).abs().max())
            assert gap <= tolerance, (step, n, gap)
    for i, (mine, theirs) in enumerate(zip(ddp["stats"], single, strict=True)):
        rel = (1e-6 if i < 2 else 1e-5) * (10 if sharded else 1)
        assert mine["grad_norm"] == pytest.approx(theirs["grad_norm"], rel=rel)
        for key in ("loss", "kl", "clip_low_fraction", "clip_high_fraction", "entropy"):
            # (the loss of a group-centred batch at ratio 1 is a sum that cancels to ~1e-8: absolute)
            assert mine[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-6 if key == "loss" else 1e-9), key


def test_fsdp_computes_in_bf16_and_keeps_fp32_weights_and_gradients(tmp_path):
    """FSDP2's mixed precision (`model.dtype: bfloat16`): the layers compute with bf16 copies of the
    weights, the shards, their gradients (reduced in fp32) and so Adam's update stay fp32, and the
    gradients are the fp32 ones within bf16's precision (one update from the same weights: after an Adam
    step, which moves every weight by about the learning rate whatever the gradient's size, the tiniest
    gradients' rounding has become a difference in the weights)."""
    from rlvr.models import build_tiny_model

    case, ranks = run_case(tmp_path, "fsdp", dtype=torch.bfloat16, aggregations=["token_mean"], steps=1, mu=1)
    bf16 = ranks["token_mean"]
    assert bf16["compute_dtypes"] == {torch.bfloat16} and bf16["stored_dtypes"] == {torch.float32}
    model, _ = build_tiny_model(0)
    model.load_state_dict(case["weights"])
    run_update(Policy(model, device=torch.device("cpu"), dtype=torch.float32), case["batch"], case, "token_mean")
    fp32 = torch.cat([p.grad.flatten() for p in model.parameters()])
    mixed = torch.cat([bf16["grads"][n].flatten() for n, _ in model.named_parameters()])
    assert mixed.dtype == torch.float32 and not torch.equal(mixed, fp32)  # computed otherwise, yet
    assert float(torch.nn.functional.cosine_similarity(mixed, fp32, dim=0)) > 0.99  # the same direction
    assert float((mixed - fp32).norm() / fp32.norm()) < 0.1  # and size, to bf16's ~3 significant digits
