"""A LoRA update under bf16 autocast keeps one bf16 cast of each frozen weight for its backward, however many
times the forward calls the layers (the prompts' pass and one per length bucket: rlvr.logprobs), and computes
the same numbers as plain autocast (rlvr.models.devices.frozen_cast_once, called by Policy.logprobs)."""

from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch

import rlvr.run.policy as policy_module
from rlvr.config.sections import LoraConfig
from rlvr.logprobs import length_buckets
from rlvr.models.adapters import add_adapters, decoder
from rlvr.models.loading import build_tiny_model
from rlvr.run.policy import Policy


def rows(lengths=(3, 4, 30, 31)):
    """Two prompts, each continued by completions of `lengths`: more than one length bucket."""
    g = torch.Generator().manual_seed(0)
    m, width = len(lengths), max(lengths)
    mask = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    return SimpleNamespace(prompt_ids=torch.randint(3, 60, (2, 6), generator=g),
                           prompt_mask=torch.ones(2, 6, dtype=torch.bool),
                           row_prompt=torch.arange(m) % 2, completion_ids=torch.randint(3, 60, (m, width), generator=g),
                           completion_mask=mask, support_floors=None)


def lora_policy(dtype=torch.bfloat16):
    model, _ = build_tiny_model()
    return Policy(add_adapters(model, LoraConfig(rank=4), "tiny"), device=torch.device("cpu"), dtype=dtype)


def frozen_linears(policy):
    output = policy.model.get_output_embeddings()
    return [m for m in policy.model.modules() if isinstance(m, torch.nn.Linear) and m is not output
            and not m.weight.requires_grad]


def autocast_alone(monkeypatch):
    """Policy.logprobs without the cast once: what plain autocast does."""
    monkeypatch.setattr(policy_module, "frozen_cast_once", lambda model, dtype: nullcontext())


def saved_casts(policy, batch):
    """The distinct bf16 tensors of a frozen linear weight's shape that the forward keeps for the backward."""
    shapes = {tuple(m.weight.shape) for m in frozen_linears(policy)}
    kept = {}

    def pack(t):
        if t.dtype == torch.bfloat16 and tuple(t.shape) in shapes:
            kept[t.untyped_storage().data_ptr()] = t
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        stats = policy.logprobs(batch, temperature=1.0)
    stats.logprobs.sum().backward()
    return len(kept)


def test_the_frozen_weights_are_kept_once_in_bf16_where_autocast_keeps_a_cast_for_every_call(monkeypatch):
    policy, batch = lora_policy(), rows()
    calls = 1 + len(length_buckets(batch.completion_mask.sum(-1).tolist()))  # the prompts' pass, then each bucket's
    assert calls > 2
    once = saved_casts(policy, batch)
    assert 0 < once <= len(frozen_linears(policy))  # (the first layer's q, k, v keep none: no gradient flows below)
    autocast_alone(monkeypatch)
    assert saved_casts(policy, batch) == calls * once


def grads_and_logprobs(policy, batch):
    stats = policy.logprobs(batch, temperature=1.0)
    stats.logprobs.sum().backward()
    return stats.logprobs.detach(), {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.requires_grad}


def test_the_cast_once_changes_no_number(monkeypatch):
    policy, batch = lora_policy(), rows()
    for p in policy.model.parameters():  # (B = 0 at the start: no gradient would reach A)
        if p.requires_grad:
            torch.nn.init.normal_(p, std=0.02, generator=torch.Generator().manual_seed(1))
    weights = [m.weight for m in frozen_linears(policy)]
    once = grads_and_logprobs(policy, batch)
    assert [m.weight for m in frozen_linears(policy)] == weights  # the fp32 weights back in place, the same objects
    assert all(w.dtype == torch.float32 for w in weights)
    policy.model.zero_grad()
    autocast_alone(monkeypatch)
    plain = grads_and_logprobs(policy, batch)
    torch.testing.assert_close(once[0], plain[0], rtol=0, atol=0)
    assert once[1].keys() == plain[1].keys() and len(once[1]) > 0
    for name in once[1]:
        torch.testing.assert_close(once[1][name], plain[1][name], rtol=0, atol=0, msg=name)


def weights_seen_by_each_call(policy, grad):
    """The frozen linears' weights as each call of the decoder sees them."""
    seen = []
    hook = decoder(policy.model).register_forward_pre_hook(
        lambda module, args: seen.append([m.weight for m in frozen_linears(policy)]))
    with torch.set_grad_enabled(grad):
        policy.logprobs(rows(), temperature=1.0)
    hook.remove()
    return seen


def test_nothing_is_cast_in_fp32_or_without_gradients():
    for policy, grad in ((lora_policy(torch.float32), True), (lora_policy(), False)):
        weights = [m.weight for m in frozen_linears(policy)]
        seen = weights_seen_by_each_call(policy, grad)
        assert seen and all(a is b for call in seen for a, b in zip(call, weights, strict=True))


def test_a_forward_that_fails_puts_the_fp32_weights_back():
    policy = lora_policy()
    weights = [m.weight for m in frozen_linears(policy)]
    bad = rows()
    bad.completion_ids[0, 0] = 10**6  # (no such token: the embedding lookup fails inside the forward)
    with pytest.raises(IndexError):
        policy.logprobs(bad, temperature=1.0)
    assert all(a is b for a, b in zip((m.weight for m in frozen_linears(policy)), weights, strict=True))
