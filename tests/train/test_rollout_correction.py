"""The rollout correction in the update (algorithm.rollout_correction): the importance weights multiply the
policy-gradient term and nothing else, and a step logs their statistics."""

import math

import pytest
import torch

from rlvr.config import AlgorithmConfig, RolloutCorrectionConfig
from rlvr.grpo.trainer import Trainer
from rlvr.rl.update import grpo_loss

from .test_step import DIGITS, tiny_config


def test_the_weights_multiply_the_policy_gradient_term_not_the_kl():
    # two tokens of one completion; ρ = 1 (π_θ = π_old), Â = 2; π_ref gives a k3 KL of e^(−0.5) − 1 + 0.5
    logprobs = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -2.0]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    algo = AlgorithmConfig(beta=0.1, loss_aggregation="token_mean")
    w = torch.tensor([[0.5, 2.0]])
    loss, kl = grpo_loss(logprobs, logprobs.detach(), ref, torch.tensor([2.0]), mask, algo, num_sequences=1,
                         num_tokens=2, constant=1.0, weights=w)
    k3 = math.exp(-0.5) - 1 + 0.5
    assert kl[0].tolist() == pytest.approx([k3, 0.0])
    assert float(loss) == pytest.approx((-0.5 * 2 + 0.1 * k3 - 2.0 * 2 + 0.0) / 2)
    loss.backward()
    # d/dlogπ of −w·ρ·Â is −w·Â; of β·k3 (k3 = e^(ref−lp) − (ref−lp) − 1) is β·(1 − e^(ref−lp))
    expected = [(-0.5 * 2 + 0.1 * (1 - math.exp(-0.5))) / 2, (-2.0 * 2 + 0.0) / 2]
    assert logprobs.grad[0].tolist() == pytest.approx(expected)


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_a_step_logs_the_weights_statistics(tmp_path, level):
    """With rlvr's own sampler the weights are 1 within rounding: nothing is cut, the KL is ~0, the ESS ~1."""
    trainer = Trainer(tiny_config(tmp_path, DIGITS, f"algorithm.rollout_correction.level={level}",
                                  "algorithm.rollout_correction.mode=mask"))
    metrics = trainer.step().metrics
    assert metrics["rollout_correction/ratio_mean"] == pytest.approx(1.0, abs=1e-3)
    assert metrics["rollout_correction/share_masked"] == 0.0
    assert abs(metrics["sampler/kl"]) < 1e-8  # (an estimate of ~0: float rounding can take it a hair below 0)
    assert metrics["rollout_correction/ess"] == pytest.approx(1.0, abs=1e-6)


def test_settings_are_checked():
    from rlvr.errors import UserError

    with pytest.raises(UserError, match="threshold=1.0 must be > 1"):
        RolloutCorrectionConfig(threshold=1.0).validate()
    with pytest.raises(UserError, match="threshold=1e.300 must be > 1 and at most 1e30"):
        RolloutCorrectionConfig(threshold=1e300).validate()  # (1/C underflows, C overflows a float32)


@pytest.mark.filterwarnings("ignore:Seems like:UserWarning")
def test_with_the_entropy_mask_a_tokens_weight_is_its_correction_times_its_mask(tmp_path):
    """algorithm.rollout_correction and top_entropy_quantile together: each token's policy-gradient term is weighted
    by its importance weight (here 2 where the sampler gave the token half the probability π_old gives it, else 1)
    times its entropy mask (0 or 1)."""
    import dataclasses

    from rlvr.correction import NO_SUMS
    from rlvr.rl.batch import micro_batches
    from rlvr.rl.update import micro_batch_loss

    from .test_update_stats import sampled_batch

    trainer, batch = sampled_batch(tmp_path, "algorithm.beta=0", "algorithm.loss_aggregation=token_mean")
    policy, plain = trainer.policy, trainer.config.algorithm
    (mb,) = micro_batches(batch.rollout, batch.loss_mask, 10_000, policy.share_prompt())
    with torch.no_grad():
        logprobs = policy.logprobs(mb, 1.0).logprobs
    lc = logprobs.shape[1]
    halved = torch.arange(lc).expand_as(logprobs) % 2 == 0
    sampled = logprobs - math.log(2.0) * halved  # π_old / π_sampler = 2 on even positions
    keep = torch.rand(logprobs.shape, generator=torch.Generator().manual_seed(0)) < 0.5
    rollout = dataclasses.replace(batch.rollout, sampling_logprobs=sampled)
    batch = dataclasses.replace(batch, scored=dataclasses.replace(batch.scored, rollout=rollout), entropy_mask=keep)
    both = dataclasses.replace(plain, rollout_correction=RolloutCorrectionConfig(level="token", threshold=10.0))
    counts = (int(batch.loss_mask.any(-1).sum()), int(batch.loss_mask.sum()))
    trained = logprobs.clone().requires_grad_()
    loss = micro_batch_loss(batch, mb, trained, both, counts=counts, max_new_tokens=12, sums=dict(NO_SUMS)).loss

    def weighted(weights):  # the loss with these weights on each token's policy-gradient term
        return float(grpo_loss(trained, trained.detach(), None, batch.advantages[:, :lc], batch.loss_mask[:, :lc],
                               plain, num_sequences=counts[0], num_tokens=counts[1], constant=12, weights=weights)[0])

    expected = weighted((1.0 + halved.float()) * keep)
    assert float(loss) == pytest.approx(expected, rel=1e-6) and float(loss) != 0.0
    assert expected != pytest.approx(weighted(keep))  # (the correction's weights count)
