"""The GRPO step (rlvr.rl.batch, update, trainer) on the tiny model: micro-batching is exact, steps learn."""

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

from rlvr.config import load_config
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.models.loading import set_checkpointing
from rlvr.optim import build_optimizer
from rlvr.rewards.batch import score_rollout
from rlvr.rl.batch import make_batch, micro_batches, outcome_advantages
from rlvr.rl.metrics import step_record
from rlvr.rl.update import policy_update
from rlvr.run.policy import Policy

TINY = ["model.name=tiny", "data.train_size=32", "data.eval_size=4", "sampling.group_size=4", "sampling.batch_size=8",
        "generation.max_new_tokens=12", "generation.temperature=1.0", "optim.lr=1e-3", "sample_every=0"]


REWARD_FNS = Path(__file__).with_name("reward_fns.py")
DIGITS = f"rewards=[{{name: '{REWARD_FNS}:digit_share', correctness: true}}]"


def tiny_config(tmp_path, *extra, steps=2):
    return load_config(None, [*TINY, f"output_dir={tmp_path / 'run'}", *extra], max_steps=steps)


def as_policy(model):
    """A bare causal LM as a Policy (one process, its own device, fp32): for its log-probs."""
    return Policy(model, device=next(model.parameters()).device, dtype=torch.float32)


def step_with_batch(trainer, monkeypatch):
    """(metrics, the TrainBatch they were computed from) of one Trainer.step()."""
    import rlvr.grpo.trainer as module

    seen = []
    monkeypatch.setattr(module, "step_record", lambda batch, *args: seen.append(batch) or real(batch, *args))
    real = step_record
    return trainer.step().metrics, seen[0]


def test_two_grpo_steps_change_the_policy_and_log_metrics(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, DIGITS))
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}
    metrics = [trainer.step().metrics, trainer.step().metrics]
    changed = sum(not torch.equal(before[n], p) for n, p in trainer.policy.model.named_parameters())
    assert changed == len(before)
    for key in ("reward/mean", "reward/std", "accuracy", "zero_variance_fraction", "kl", "clip_low_fraction",
                "clip_high_fraction", "entropy", "completion_length/mean", "completion_length/max", "truncation_rate",
                "tokens_per_second", "step_seconds", "lr", "grad_norm", f"reward/{REWARD_FNS}:digit_share/mean"):
        assert key in metrics[1], key
    assert metrics[0]["kl"] == 0.0  # π_θ = π_ref before the first update
    assert metrics[1]["kl"] > 0.0
    assert trainer.step_count == 2


def _batch(trainer):
    source = trainer.source
    scored = score_rollout(source.sample(source.prompts.next_batch(), 0, source.synced()), trainer.parts.rewards)
    # rewards of a random model are all zero: give the batch a signal to push on
    return dataclasses.replace(scored, rewards=torch.randn(scored.rewards.shape,
                                                           generator=torch.Generator().manual_seed(0)))


@pytest.mark.filterwarnings("ignore:Seems like:UserWarning")
@pytest.mark.parametrize("aggregation", ["sequence_mean", "token_mean", "constant"])
def test_micro_batches_accumulate_to_the_full_batch_gradient(tmp_path, aggregation):
    trainer = Trainer(tiny_config(tmp_path, f"algorithm.loss_aggregation={aggregation}", "algorithm.beta=0.1"))
    scored = _batch(trainer)
    algo = trainer.config.algorithm
    batch = make_batch(scored, outcome_advantages(scored, algo), policy=trainer.policy,
                                                  algo=algo, micro_batch_tokens=10_000, temperature=1.0)
    assert len(micro_batches(batch.rollout, batch.loss_mask, 10_000)) == 1
    assert len(micro_batches(batch.rollout, batch.loss_mask, 20)) > 2
    grads = {}
    for budget in (10_000, 20):
        optimizer, scheduler = build_optimizer(trainer.policy.model, trainer.config.optim, 10)
        optimizer.step = lambda: None  # keep the weights: compare gradients only
        stats = policy_update(trainer.policy, optimizer, scheduler, batch, algo=algo, micro_batch_tokens=budget,
                              temperature=1.0, max_grad_norm=0.0, max_new_tokens=12)
        grads[budget] = ({n: p.grad.clone() for n, p in trainer.policy.model.named_parameters()}, stats["loss"])
    assert grads[20][1] == pytest.approx(grads[10_000][1], abs=1e-5)
    for name, g in grads[10_000][0].items():
        assert torch.allclose(g, grads[20][0][name], atol=1e-5), name


def test_a_prompt_run_with_every_completion_is_counted_with_every_completion(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, "sampling.group_size=4"))
    rollout = trainer.source.sample(trainer.source.prompts.next_batch(), 0, trainer.source.synced())
    assert trainer.policy.share_prompt()
    prompt = rollout.prompt_mask.sum(-1).repeat_interleave(rollout.group_size)
    budget = int(prompt.max() + 4 * rollout.lengths.max())  # a prompt with its 4 completions, or one with each
    for share, cost in ((True, None), (False, prompt + rollout.lengths)):
        runs = micro_batches(rollout, rollout.completion_mask, budget, share)
        assert torch.equal(torch.cat([mb.rows for mb in runs]), torch.arange(len(prompt)))
        if cost is not None:  # the tokens each run computes: its rows' prompts and completions
            assert all(int(cost[mb.rows].sum()) <= budget for mb in runs)
    assert len(micro_batches(rollout, rollout.completion_mask, budget, False)) > len(
        micro_batches(rollout, rollout.completion_mask, budget, True))
    set_checkpointing(trainer.policy.model, True)  # which runs every prompt with each of its completions
    assert not trainer.policy.share_prompt()


def test_mask_truncated_removes_rows_from_the_loss(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, "algorithm.mask_truncated=true", "generation.max_new_tokens=3"))
    scored = _batch(trainer)
    algo = trainer.config.algorithm
    batch = make_batch(scored, outcome_advantages(scored, algo), policy=trainer.policy,
                                                  algo=algo, micro_batch_tokens=1000, temperature=1.0)
    truncated = batch.rollout.truncated
    assert truncated.any()
    assert not batch.loss_mask[truncated].any()
    assert torch.equal(batch.loss_mask[~truncated], batch.rollout.completion_mask[~truncated])


def test_no_reference_model_when_beta_is_zero(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, "algorithm.beta=0"))
    assert trainer.policy.reference is None
    assert trainer.step().metrics["kl"] == 0.0  # (no KL term: none logged either)
    assert Trainer(tiny_config(tmp_path)).policy.reference is not None


@pytest.mark.parametrize("setting, no_grad", [(None, 64), ("optim.logprob_micro_batch_tokens=40", 40)])
def test_passes_without_gradients_take_their_own_token_budget(tmp_path, monkeypatch, setting, no_grad):
    """log π_ref (β > 0) and log π_old (μ > 1) keep no activations: 4 × micro_batch_tokens by default."""
    import rlvr.rl.batch as batch_module
    import rlvr.rl.update as update_module

    budgets = set()

    def spy(rollout, mask, max_tokens, share_prompt=True):
        budgets.add((torch.is_grad_enabled(), max_tokens))
        return micro_batches(rollout, mask, max_tokens, share_prompt)

    for module in (batch_module, update_module):
        monkeypatch.setattr(module, "micro_batches", spy)
    extra = [setting] if setting else []
    Trainer(tiny_config(tmp_path, "optim.micro_batch_tokens=16", "algorithm.updates_per_batch=2", *extra)).step()
    assert budgets == {(False, no_grad), (True, 16)}


def test_mu_updates_reuse_old_logprobs(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, DIGITS, "algorithm.updates_per_batch=3", "algorithm.beta=0"))
    scored, _ = trainer.source.take(0)
    algo = trainer.config.algorithm
    batch = make_batch(scored, outcome_advantages(scored, algo), policy=trainer.policy, algo=algo,
                       micro_batch_tokens=2048, temperature=1.0)
    # log π_old is the policy that sampled the batch, stored once and reused by all three updates
    assert torch.allclose(batch.old_logprobs, batch.rollout.sampling_logprobs, atol=1e-5)
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}
    m = trainer.step().metrics
    assert math.isfinite(m["loss"]) and m["grad_norm"] > 0
    assert any(not torch.equal(before[n], p) for n, p in trainer.policy.model.named_parameters())


def test_the_reference_follows_the_policy_at_the_refresh_step_and_not_before(tmp_path):
    """Iterative GRPO (DeepSeekMath Algorithm 1): with a reward that moves the policy, π_ref stays the starting
    model until step K, is the policy of step K from then on, and stays it while the policy moves on."""
    trainer = Trainer(tiny_config(tmp_path, DIGITS, "algorithm.ref_refresh_steps=2", "algorithm.beta=0.04"))

    def weights(module):
        return [p.detach().clone() for p in module.parameters()]

    start = weights(trainer.policy.model)
    trainer.step()
    assert trainer.step_count == 1 and not all(map(torch.equal, weights(trainer.policy.model), start))  # it moved
    assert all(map(torch.equal, weights(trainer.policy.reference), start))  # not refreshed before step K
    trainer.step()
    at_refresh = weights(trainer.policy.model)
    assert all(map(torch.equal, weights(trainer.policy.reference), at_refresh))  # π_ref ← π_θ at step K
    assert not all(map(torch.equal, at_refresh, start))
    trainer.step()
    assert all(map(torch.equal, weights(trainer.policy.reference), at_refresh))  # until the next refresh
    assert not all(map(torch.equal, weights(trainer.policy.model), at_refresh))


def test_train_writes_the_run_directory(tmp_path):
    summary = train_grpo(tiny_config(tmp_path, "save_every=1"))
    run = tmp_path / "run"
    assert (run / "config.yaml").is_file() and (run / "summary.json").is_file()
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    assert list((run / "tensorboard").iterdir())
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000001", "step-000002"]
    assert set(summary) >= {"before", "after", "gain", "steps"}
    assert summary["before"]["n"] == 4
    # the task's prompts show an example exchange: the questions alone are measured as well, paired
    alone, gain = summary["after"]["alone"], summary["gain"]["alone"]
    assert alone["n"] == 4 and set(gain) == {"strict", "lenient"}
    before = summary["before"]["alone"]
    assert gain["strict"]["mean"] == pytest.approx(alone["strict"]["mean"] - before["strict"]["mean"])


def test_few_shot_turns_come_before_every_prompt(tmp_path):
    default = Trainer(tiny_config(tmp_path))  # the arithmetic task's own example exchange, with 4 prompts in 5
    shown = ["10 + 10" in p.text for p in default.parts.train]
    assert shown == [i % 5 != 0 for i in range(len(shown))] and len(shown) == 32
    assert default.parts.train[1].text.startswith("<|im_start|>user\nWhat is 10 + 10?")
    assert default.parts.eval[0].text.count("<|im_start|>user") == 2
    alone = default.parts.eval_alone  # the same held-out questions without it
    assert [p.example for p in alone] == [p.example for p in default.parts.eval]
    assert all(t.count("<|im_start|>user") == 1 and "10 + 10" not in t for t in [p.text for p in alone])
    assert [t.split("<|im_start|>user")[-1] for t in [p.text for p in alone]] == [
        t.split("<|im_start|>user")[-1] for t in [p.text for p in default.parts.eval]]
    half = Trainer(tiny_config(tmp_path, "data.few_shot_share=0.5"))  # every other training prompt goes without
    shown = ["10 + 10" in t for t in [p.text for p in half.parts.train]]
    assert shown == [i % 2 == 1 for i in range(len(shown))] and len(shown) == 32
    assert [t.split("<|im_start|>user")[-1] for t in [p.text for p in half.parts.train]] == [
        t.split("<|im_start|>user")[-1] for t in [p.text for p in default.parts.train]]
    assert all("10 + 10" in t for t in [p.text for p in half.parts.eval])  # held-out prompts keep the example
    none = Trainer(tiny_config(tmp_path, "data.few_shot=[]"))
    assert none.parts.train[0].text.count("<|im_start|>user") == 1
    assert none.parts.eval_alone is None  # nothing shown, nothing to take away
    custom = Trainer(tiny_config(tmp_path, "data.few_shot=[{prompt: 'Q?', completion: 'A.'}]"))
    assert all("user\nQ?<|im_end|>\n<|im_start|>assistant\nA.<|im_end|>" in p.text for p in custom.parts.train)
    every = Trainer(tiny_config(tmp_path, "data.few_shot_share=1"))  # the task's example with every prompt
    assert all("10 + 10" in p.text for p in every.parts.train)


def test_reward_params_reach_the_function(tmp_path):
    trainer = Trainer(tiny_config(tmp_path,
                                  "rewards=[{name: overlong_penalty, params: {max_tokens: 12, cache_tokens: 4}}]"))
    scored, _ = trainer.source.take(0)
    lengths = scored.rollout.lengths.view(scored.rewards.shape).float()
    expected = (-(lengths - 8).clamp(min=0) / 4).clamp(min=-1)
    assert torch.allclose(scored.reward_components["overlong_penalty"], expected)
    with pytest.raises(UserError):
        Trainer(tiny_config(tmp_path, "rewards=[{name: overlong_penalty, params: {max_tokenz: 3}}]"))


@pytest.mark.parametrize("concurrent", [False, True])
def test_overlapped_scoring_equals_scoring_after_decoding(tmp_path, monkeypatch, concurrent):
    """Each group is scored once, as it finishes, on the main thread: between two decoding steps (a CPU)
    or while a worker thread decodes the others (an accelerator; forced here); the same rewards either way."""
    import threading

    import rlvr.rl.rollouts as rollouts_module
    from rlvr.rewards import RewardSpec
    from rlvr.rl.sampling import score_while_sampling

    from .reward_fns import digit_share

    calls, threads = [], set()
    monkeypatch.setattr(rollouts_module, "score_while_sampling",
                        lambda *a, **k: score_while_sampling(*a, **{**k, "concurrent": concurrent}))

    def counting(completions, **kwargs):
        calls.append(len(completions))
        threads.add(threading.current_thread())
        return digit_share(completions)

    results = {}
    for overlap in (True, False):
        trainer = Trainer(tiny_config(tmp_path, f"sampling.overlap_rewards={str(overlap).lower()}",
                                      "sampling.batch_size=16"))
        trainer.parts.rewards, trainer.parts.correctness = [RewardSpec("counting", counting)], "counting"
        calls.clear()
        scored = trainer.source.score_round(0, 0, trainer.source.synced(), trainer.world)
        results[overlap] = (scored.rewards, scored.rollout.completion_ids, list(calls))
    assert torch.equal(results[True][0], results[False][0])
    assert torch.equal(results[True][1], results[False][1])
    assert results[True][2] == [4, 4, 4, 4]  # once per group of G = 4, as each group finished
    assert results[False][2] == [16]  # once per batch
    assert threads == {threading.main_thread()}


def test_generate_reports_every_group_once():
    from rlvr.models import build_tiny_model
    from rlvr.rollout import SamplingParams, generate

    model, tok = build_tiny_model()
    seen = []
    stops = [tok.convert_tokens_to_ids(c) for c in "aeiou"]
    out = generate(model.eval(), [tok(p).input_ids for p in ("one", "two", "three")], 3, SamplingParams(10, 1.0),
                   stop_ids=stops, pad_id=tok.pad_token_id, seeds=list(range(9)),
                   on_group_done=lambda p, ids, lengths: seen.append((p, lengths.tolist())))
    assert sorted(p for p, _ in seen) == [0, 1, 2]
    for p, lengths in seen:
        assert lengths == out.completion_mask[p * 3:(p + 1) * 3].sum(-1).tolist()


def test_eval_every_logs_held_out_accuracy(tmp_path):
    train_grpo(tiny_config(tmp_path, "eval_every=2", "eval_before=false", "eval_after=false", steps=4))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert ["eval/strict" in x for x in lines] == [False, True, False, True]
    assert 0.0 <= lines[1]["eval/strict"] <= lines[1]["eval/lenient"] <= 1.0
    # the task shows an example exchange: the questions alone are measured at the last step (the run's
    # "after"), and between only when asked
    assert "eval/alone/strict" not in lines[1] and 0.0 <= lines[3]["eval/alone/strict"] <= 1.0
    train_grpo(tiny_config(tmp_path / "every", "eval_every=2", "eval_before=false", "eval_after=false",
                           "eval_alone_every=true", steps=4))
    lines = [json.loads(x) for x in (tmp_path / "every" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert 0.0 <= lines[1]["eval/alone/strict"] <= lines[1]["eval/alone/lenient"] <= 1.0


def test_a_completion_no_reward_could_score_gets_no_advantage_and_no_loss(tmp_path, monkeypatch):
    """A reward that scores a group but not one of its completions (a failed check) leaves that
    completion unscored: out of the group's statistics, out of the loss, counted in a metric."""
    flaky = (f"rewards=[{{name: '{REWARD_FNS}:digit_share_but_not_the_second', correctness: true}}, "
             "{name: boxed_format}]")
    trainer = Trainer(tiny_config(tmp_path, flaky))
    metrics, batch = step_with_batch(trainer, monkeypatch)
    g = batch.rollout.group_size
    unscored = torch.zeros(batch.rollout.num_prompts, g, dtype=torch.bool)
    unscored[:, 1] = True
    assert torch.equal(batch.scored.rewards.isnan(), unscored)
    assert metrics["reward/unscored"] == batch.rollout.num_prompts and not math.isnan(metrics["reward/mean"])
    advantages = batch.advantages[:, 0].view(-1, g)
    assert advantages[:, 1].abs().sum() == 0 and advantages.sum(-1).abs().max() < 1e-4
    assert not batch.loss_mask.view(-1, g, batch.loss_mask.shape[1])[:, 1].any()


def test_the_last_steps_evaluation_is_the_after_one_not_measured_twice(tmp_path, monkeypatch):
    calls = []
    real = Trainer.evaluate
    monkeypatch.setattr(Trainer, "evaluate", lambda self: calls.append(self.step_count) or real(self))
    summary = train_grpo(tiny_config(tmp_path, "eval_every=2", steps=4))
    assert calls == [0, 2, 4]  # before, step 2, step 4 (= after)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert summary["after"]["strict"]["mean"] == lines[-1]["eval/strict"]


def test_context_tokens_of_a_multi_turn_rollout_carry_no_loss_and_no_kl(tmp_path):
    """Token by token: what the environment wrote (outside the rollout's model mask) changes neither the
    loss, nor the KL, nor the gradient, whatever its advantages and reference log-probs; a model token does."""
    trainer = Trainer(tiny_config(tmp_path, "algorithm.beta=0.1"))
    scored = _batch(trainer)
    model_mask = scored.rollout.completion_mask.clone()
    model_mask[:, 1::3] = False  # every third token: the environment's
    scored = dataclasses.replace(scored, rollout=dataclasses.replace(scored.rollout, model_mask=model_mask))
    algo = trainer.config.algorithm
    batch = make_batch(scored, outcome_advantages(scored, algo), policy=trainer.policy,
                                                  algo=algo, micro_batch_tokens=10_000, temperature=1.0)
    assert torch.equal(batch.loss_mask, model_mask)

    def update(b):
        optimizer, scheduler = build_optimizer(trainer.policy.model, trainer.config.optim, 10)
        optimizer.step = lambda: None  # keep the weights: compare gradients only
        stats = policy_update(trainer.policy, optimizer, scheduler, b, algo=algo, micro_batch_tokens=10_000,
                              temperature=1.0, max_grad_norm=0.0, max_new_tokens=12)
        return stats, torch.cat([p.grad.flatten() for p in trainer.policy.model.parameters()])

    stats, grad = update(batch)
    noise = torch.randn(batch.advantages.shape, generator=torch.Generator().manual_seed(1))
    context = ~model_mask
    noisy = dataclasses.replace(batch, advantages=torch.where(context, 100 * noise, batch.advantages),
                                ref_logprobs=torch.where(context, batch.ref_logprobs - 5, batch.ref_logprobs))
    noisy_stats, noisy_grad = update(noisy)
    assert torch.allclose(noisy_grad, grad, atol=1e-6)
    assert noisy_stats["loss"] == pytest.approx(stats["loss"]) and noisy_stats["kl"] == pytest.approx(stats["kl"])
    one = torch.zeros_like(model_mask)
    one[model_mask.nonzero()[0][0], model_mask.nonzero()[0][1]] = True  # one model token
    _, moved = update(dataclasses.replace(batch, advantages=torch.where(one, batch.advantages + 1, batch.advantages)))
    assert not torch.allclose(moved, grad, atol=1e-6)


@pytest.mark.parametrize("sampling", [["generation.temperature=0.7"], ["generation.temperature=1.0"],
                                      ["generation.top_p=0.9"], ["generation.top_k=20"],
                                      ["generation.temperature=0.7", "generation.top_k=20", "generation.top_p=0.9"]],
                         ids=["T0.7", "T1", "top_p", "top_k", "all"])
def test_the_trainer_recomputes_the_samplers_log_probs_whatever_the_sampling_settings(tmp_path, sampling):
    """sampler/logp_abs_diff_*: the trained tokens' log-probs under the weights that sampled them, from the
    update's own forward, against the sampler's. Not 0.0: the decoding forward (a KV cache, one token at a
    time) and the update's (the whole completion at once) multiply matrices of other shapes, so fp32 sums in
    another order; measured here at most ~1e-5 nats. Over the whole vocabulary instead of the support top-k /
    top-p kept, it was ~1e-2."""
    trainer = Trainer(tiny_config(tmp_path, DIGITS, *sampling))
    for _ in range(2):
        metrics = trainer.step().metrics
        assert 0.0 <= metrics["sampler/logp_abs_diff_mean"] <= metrics["sampler/logp_abs_diff_max"] < 5e-5
