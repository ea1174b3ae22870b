"""A LoRA layer of what a recipe trains forms W x + (α / r) · B A x in place (rlvr.models.adapters.sum_lora_in_place,
registered by rlvr.distributed.parallel.Trained): no new tensor for the scaled term nor for the sum, and the same
bits as peft's own forward, in the forward and in every gradient, in fp32 and under bf16 autocast."""

import copy

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from rlvr.models.adapters import sum_lora_in_place
from rlvr.run.policy import Policy

from .test_adapter_sums import adapted, lora_layers
from .test_frozen_cast import rows

aten = torch.ops.aten


class Ops(TorchDispatchMode):
    """The aten operators called within."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[object] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        return func(*args, **(kwargs or {}))


def plain(model):
    """`model` with peft's own forward on every layer again."""
    for layer in lora_layers(model):
        vars(layer).pop("forward", None)
    return model


def layer_ops(layer, dtype):
    x = torch.randn(5, layer.get_base_layer().in_features, requires_grad=True)
    with Ops() as ops, torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
        layer(x)
    return ops.seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_policys_layers_add_the_term_in_place(dtype):
    p = Policy(adapted(), device=torch.device("cpu"), dtype=dtype)
    layer = lora_layers(p.model)[0]
    ops = layer_ops(layer, dtype)
    assert aten.add_.Tensor in ops and aten.mul_.Tensor in ops
    assert aten.add.Tensor not in ops and aten.mul.Tensor not in ops
    peft_ops = layer_ops(lora_layers(plain(p.model))[0], dtype)  # what the test tells apart
    assert aten.add.Tensor in peft_ops and aten.mul.Tensor in peft_ops


def logprobs_and_grads(p, dropout_seed=None):
    if dropout_seed is not None:
        torch.manual_seed(dropout_seed)
    lp = p.logprobs(rows(), temperature=0.7).logprobs
    (lp * torch.linspace(-1, 1, lp.shape[-1])).sum().backward()
    return [lp.detach()] + [q.grad for q in p.model.parameters() if q.requires_grad]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_the_same_bits_as_pefts_sum_forward_and_backward(dtype, dropout):
    def model():
        torch.manual_seed(0)  # (the same base weights and A)
        m = adapted() if dropout == 0 else adapted(scale=1e-2, dropout=dropout)
        return Policy(m, device=torch.device("cpu"), dtype=dtype)

    ours, theirs = model(), model()
    plain(theirs.model)
    assert all("forward" in vars(layer) for layer in lora_layers(ours.model))
    a, b = logprobs_and_grads(ours, 3), logprobs_and_grads(theirs, 3)
    assert len(a) == len(b) > 1
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)
    if dropout:  # (the dropout draws: another seed, other numbers)
        assert not torch.equal(logprobs_and_grads(model(), 4)[0], a[0])


def test_adapters_off_and_merged_are_pefts_and_a_deep_copy_sums_its_own_layers():
    model = adapted(scale=1e-2)
    sum_lora_in_place(model)
    forwards = [vars(layer)["forward"] for layer in lora_layers(model)]
    sum_lora_in_place(model)  # once only: the same bound method stays
    assert all(vars(layer)["forward"] is f for layer, f in zip(lora_layers(model), forwards, strict=True))
    layer = lora_layers(model)[0]
    x = torch.randn(3, layer.get_base_layer().in_features)
    with torch.no_grad():
        adapted_out = layer(x)
        with model.disable_adapter():
            assert torch.equal(layer(x), layer.get_base_layer()(x))
        layer.merge()
        merged_out = layer(x)
        layer.unmerge()
    torch.testing.assert_close(merged_out, adapted_out)
    assert not torch.equal(adapted_out, layer.get_base_layer()(x))
    twin = copy.deepcopy(model)
    assert all(t.forward.__self__ is t for t in lora_layers(twin))
