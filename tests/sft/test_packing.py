"""Packing changes speed, never the loss: a packed batch's loss and gradients equal the unpacked
batch's and those of each example run alone through the plain model (a slow obvious reference)."""

import random

import pytest
import torch
import torch.nn.functional as F

from rlvr.models import build_tiny_model
from rlvr.sft.data import SFTExample
from rlvr.sft.loss import completion_nll
from rlvr.sft.masking import IGNORE, trained_count
from rlvr.sft.packing import PADDING, micro_batches, pack


def random_examples(rng, n, vocab):
    """Examples of random tokens and lengths, each with a random trained stretch after its first token."""
    examples = []
    for _ in range(n):
        length = rng.randint(2, 24)
        ids = [rng.randrange(3, vocab) for _ in range(length)]
        start = rng.randint(1, length - 1)
        end = rng.randint(start + 1, length)
        examples.append(SFTExample(ids, [IGNORE] * start + ids[start:end] + [IGNORE] * (length - end)))
    return examples


def step_loss_and_grads(model, batches, count):
    model.zero_grad(set_to_none=True)
    total = 0.0
    for mb in batches:
        nll = completion_nll(model, mb)
        (nll.total / count).backward()
        total += float(nll.total.detach()) / count
    return total, {name: p.grad.clone() for name, p in model.named_parameters()}


def reference_loss_and_grads(model, examples, count):
    """Each example alone, no mask, no position ids, the full logits and F.cross_entropy."""
    model.zero_grad(set_to_none=True)
    total = 0.0
    for e in examples:
        logits = model(input_ids=torch.tensor([e.input_ids])).logits[0, :-1]
        nll = F.cross_entropy(logits, torch.tensor(e.labels[1:]), ignore_index=IGNORE, reduction="sum")
        (nll / count).backward()
        total += float(nll.detach()) / count
    return total, {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("seed", range(5))
def test_packed_loss_and_gradients_equal_unpacked_and_alone(attention, seed):
    torch.manual_seed(seed)
    model, tokenizer = build_tiny_model(seed)
    model.config._attn_implementation = attention
    rng = random.Random(seed)
    examples = random_examples(rng, 12, len(tokenizer))
    count = sum(trained_count(e.labels) for e in examples)
    packed = micro_batches(examples, packing=True, max_length=40, micro_batch_tokens=rng.choice([40, 80, 4000]),
                           pad_id=0)
    unpacked = micro_batches(examples, packing=False, max_length=40, micro_batch_tokens=4000, pad_id=0)
    assert sum(mb.input_ids.shape[0] for mb in packed) < len(examples)  # some rows really hold several examples
    assert all(mb.input_ids.shape[1] <= 40 for mb in packed)

    loss_packed, grads_packed = step_loss_and_grads(model, packed, count)
    loss_unpacked, grads_unpacked = step_loss_and_grads(model, unpacked, count)
    loss_alone, grads_alone = reference_loss_and_grads(model, examples, count)
    assert loss_packed == pytest.approx(loss_alone, rel=1e-5) and loss_unpacked == pytest.approx(loss_alone, rel=1e-5)
    for name, reference in grads_alone.items():
        torch.testing.assert_close(grads_packed[name], reference, rtol=1e-4, atol=1e-6,
                                   msg=f"packed grad of {name}")
        torch.testing.assert_close(grads_unpacked[name], reference, rtol=1e-4, atol=1e-6,
                                   msg=f"unpacked grad of {name}")


def test_no_loss_crosses_an_example_boundary():
    # the second example's first token is labelled, but nothing of its own predicts it
    examples = [SFTExample([5, 6], [IGNORE, 6]), SFTExample([7, 8], [7, 8])]
    (mb,) = micro_batches(examples, packing=True, max_length=8, micro_batch_tokens=100, pad_id=0)
    model, _ = build_tiny_model(0)
    assert mb.input_ids.tolist() == [[5, 6, 7, 8]] and completion_nll(model, mb).tokens == 2  # 6 and 8, not 7


def test_pack_respects_capacity_and_keeps_every_example():
    rng = random.Random(0)
    lengths = [rng.randint(1, 10) for _ in range(50)]
    rows = pack(lengths, capacity=16)
    assert sorted(i for row in rows for i in row) == list(range(50))
    assert all(sum(lengths[i] for i in row) <= 16 for row in rows)
    assert len(rows) <= 2 * -(-sum(lengths) // 16)  # first-fit decreasing wastes little


def test_micro_batches_stay_within_the_token_budget():
    examples = [SFTExample([1] * n, [IGNORE] + [1] * (n - 1)) for n in (30, 20, 12, 10, 8, 5, 3)]
    batches = micro_batches(examples, packing=False, max_length=64, micro_batch_tokens=40, pad_id=0)
    assert [tuple(mb.input_ids.shape) for mb in batches] == [(1, 30), (2, 20), (4, 10)]
    assert sum(int((mb.segment_ids != PADDING).sum()) for mb in batches) == 88
