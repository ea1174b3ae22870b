"""Under bf16 autocast a LoRA policy's forward keeps the adapters' term (α / r) · B A x where it is under half a
unit in the last place of the base layer's output, which peft's sum rounds away whole
(rlvr.models.adapters.add_unrounded_sums, registered on what a recipe trains): the update computes the adapted
model, as the sampler does, not nearly the base one. Nothing changes with the adapters off, while decoding, or in
fp32."""

import copy

import pytest
import torch

from rlvr.config.sections import LoraConfig
from rlvr.models.adapters import _UnroundedSum, add_adapters, add_unrounded_sums
from rlvr.models.loading import build_tiny_model, set_checkpointing
from rlvr.run.policy import Policy

from .test_frozen_cast import rows

BF16 = torch.bfloat16


def adapted(scale=2e-4, checkpointing=False, dropout=0.0):
    """The tiny model with adapters whose B has entries of about `scale` (B starts at 0; a few AdamW steps at a
    LoRA learning rate give entries of that size)."""
    model, _ = build_tiny_model()
    if checkpointing:
        set_checkpointing(model, True)
    model = add_adapters(model, LoraConfig(rank=4, dropout=dropout), "tiny")
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * scale)
    return model


def policy(model, dtype=BF16):
    return Policy(model, device=torch.device("cpu"), dtype=dtype)


def lora_layers(model):
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def hooks(model):
    return [h for layer in lora_layers(model) for h in layer.get_base_layer()._forward_hooks.values()
            if isinstance(h, _UnroundedSum)]


def without_hooks(model):
    for layer in lora_layers(model):
        base = layer.get_base_layer()
        for key, h in list(base._forward_hooks.items()):
            if isinstance(h, _UnroundedSum):
                del base._forward_hooks[key]
    return model


def half_ulp(x):
    """Half a unit in the last place of bf16 values `x`."""
    return 2.0 ** (torch.floor(torch.log2(x.float().abs())) - 8)


def test_a_term_under_half_a_unit_of_the_output_is_kept_where_pefts_sum_drops_it():
    model = adapted(scale=1e-5)
    layer = lora_layers(model)[0]
    base, a, b = layer.get_base_layer(), layer.lora_A["default"], layer.lora_B["default"]
    x = torch.randn(8, base.in_features, generator=torch.Generator().manual_seed(2))
    rounded = torch.nn.functional.linear(x.to(BF16), base.weight.to(BF16))  # what autocast's base output is
    with torch.no_grad():
        term = (x.double() @ a.weight.double().T @ b.weight.double().T) * layer.scaling["default"]
    small = term.abs() < half_ulp(rounded)
    assert small.float().mean() > 0.95 and term.abs().max() > 0  # the case: nearly every term under half a unit
    with torch.no_grad(), torch.autocast("cpu", dtype=BF16):
        plain = layer(x)
    assert plain.dtype == BF16 and torch.equal(plain[small], rounded[small])  # peft's sum: the term dropped whole
    add_unrounded_sums(model, BF16)
    assert len(hooks(model)) == len(lora_layers(model))
    with torch.no_grad(), torch.autocast("cpu", dtype=BF16):
        kept = layer(x)
    assert kept.dtype == torch.float32
    # the term added to the same rounded output: kept to bf16's precision of the term itself
    torch.testing.assert_close((kept.double() - rounded.double()), term, rtol=2e-2, atol=1e-2 * float(term.abs().max()))
    add_unrounded_sums(model, BF16)  # once only
    assert len(hooks(model)) == len(lora_layers(model))


def logprobs_adapters_off(p):
    """What the reference pass of a LoRA policy computes (AdaptersOff: the adapters disabled)."""
    with torch.no_grad(), p.model.disable_adapter():
        return p.logprobs(rows(), temperature=1.0).logprobs


def layer_outputs(p, grad):
    """The dtypes of the LoRA layers' outputs in a forward of Policy.logprobs."""
    seen = []
    handles = [layer.register_forward_hook(lambda m, i, o: seen.append(o.dtype)) for layer in lora_layers(p.model)]
    with torch.set_grad_enabled(grad):
        p.logprobs(rows(), temperature=1.0)
    for h in handles:
        h.remove()
    return seen


def test_the_policys_bf16_forward_adds_every_term_unrounded():
    """The policy has the hooks (Trained registers them): in its forward, with or without gradients, each adapted
    layer's sum is fp32 (the term added to the rounded base output exactly), where peft's is bf16 (rounded again)."""
    hooked = policy(adapted())
    plain = policy(adapted())
    without_hooks(plain.model)
    for grad in (True, False):
        assert set(layer_outputs(hooked, grad)) == {torch.float32}
        assert set(layer_outputs(plain, grad)) == {BF16}
    assert set(layer_outputs(policy(adapted(), torch.float32), True)) == {torch.float32}


def test_nothing_changes_with_the_adapters_off_while_decoding_or_in_fp32():
    p = policy(adapted())
    assert hooks(p.model)
    ids = rows().completion_ids

    def decode(model):
        return model(input_ids=ids).logits

    before = logprobs_adapters_off(p), p.decoding(decode)
    without_hooks(p.model)
    after = logprobs_adapters_off(p), p.decoding(decode)
    for x, y in zip(before, after, strict=True):
        assert torch.equal(x, y)
    assert not hooks(policy(adapted(), torch.float32).model)


def test_a_deep_copy_hooks_its_own_layers():
    model = policy(adapted()).model
    twin = copy.deepcopy(model)
    assert [h.layer for h in hooks(twin)] == lora_layers(twin)
    assert all(a is not b for a, b in zip(lora_layers(twin), lora_layers(model), strict=True))


def test_activation_checkpointing_recomputes_the_same_forward():
    """transformers' checkpointing (non-reentrant) recomputes each layer in the backward and checks that the
    recomputed tensors have the forward's dtypes: the hooks stay on for it."""
    for checkpointing in (False, True):
        p = policy(adapted(checkpointing=checkpointing))
        stats = p.logprobs(rows(), temperature=1.0)
        stats.logprobs.sum().backward()
        grads = [q.grad for q in p.model.parameters() if q.requires_grad]
        assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)


def outputs_while(model, run):
    """The dtypes of `model`'s LoRA layers' outputs while `run()` runs."""
    seen = []
    handles = [layer.register_forward_hook(lambda m, i, o: seen.append(o.dtype)) for layer in lora_layers(model)]
    run()
    for h in handles:
        h.remove()
    return set(seen)


@pytest.mark.parametrize("trainer", ["sft", "reward model", "ppo critic"])
def test_every_trainer_of_adapters_under_bf16_adds_the_terms_unrounded(tmp_path, trainer):
    """Every module a recipe trains has the hooks (rlvr.distributed.parallel.Trained registers them), as the
    policy's: SFT's model, the reward model, the PPO critic's backbone (a deep copy of the policy's); and forms its
    sums in place (tests/train/test_lora_sum_in_place.py)."""
    model_section = {"name": "tiny", "lora": {"rank": 4}, "dtype": "bfloat16"}
    if trainer == "sft":
        from rlvr.sft.train import SFTTrainer
        from tests.sft.conftest import echo_rows, tiny_sft_config, write_rows

        sft = SFTTrainer(tiny_sft_config(write_rows(tmp_path / "rows.jsonl", echo_rows()), tmp_path / "run",
                                         model=model_section))
        model, run = sft.model, sft.step
    elif trainer == "reward model":
        from rlvr.reward_models.train import RewardModelTrainer
        from tests.reward_models.conftest import tiny_rm_config, write_pairs

        rm = RewardModelTrainer(tiny_rm_config(write_pairs(tmp_path / "pairs.jsonl"), tmp_path / "run",
                                               model=model_section))
        model, run = rm.model, rm.step
    else:
        from rlvr.ppo.trainer import PPOTrainer
        from tests.train.test_step import DIGITS, tiny_config

        ppo = PPOTrainer(tiny_config(tmp_path, DIGITS, "model.dtype=bfloat16", "model.lora.rank=4"))
        rollout = ppo.source.take(0)[0].rollout
        model, run = ppo.critic.module.backbone, lambda: ppo.critic.values(rollout)
    assert outputs_while(model, run) == {torch.float32}  # (peft's sums would be bf16)
    assert all("forward" in vars(layer) for layer in lora_layers(model))  # the sums in place (sum_lora_in_place)
