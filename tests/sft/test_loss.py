"""The held-out loss is the token mean of the completion tokens' NLL, whatever the batching."""

import math

import pytest
import torch
import torch.nn.functional as F

from rlvr.models import build_tiny_model
from rlvr.sft.data import SFTExample
from rlvr.sft.loss import held_out_loss
from rlvr.sft.masking import IGNORE

EXAMPLES = [
    SFTExample([10, 11, 12, 13], [IGNORE, IGNORE, 12, 13]),
    SFTExample([20, 21], [IGNORE, 21]),
    SFTExample([30, 31, 32, 33, 34, 35], [IGNORE, IGNORE, IGNORE, IGNORE, 34, IGNORE]),
]


def test_held_out_loss_is_the_token_mean_over_all_examples():
    model, _ = build_tiny_model(0)
    model.train()
    nll, tokens = 0.0, 0
    with torch.no_grad():
        for e in EXAMPLES:
            logits = model(input_ids=torch.tensor([e.input_ids])).logits[0, :-1]
            nll += float(F.cross_entropy(logits, torch.tensor(e.labels[1:]), ignore_index=IGNORE, reduction="sum"))
            tokens += sum(label != IGNORE for label in e.labels[1:])
    assert tokens == 4  # a token mean, not a mean of the three per-example means
    for packing, budget in [(False, 1000), (False, 4), (True, 1000)]:
        result = held_out_loss(model, EXAMPLES, packing=packing, max_length=12, micro_batch_tokens=budget, pad_id=0)
        assert result["tokens"] == 4 and result["examples"] == 3
        assert result["loss"] == pytest.approx(nll / tokens, rel=1e-5)
        assert result["perplexity"] == pytest.approx(math.exp(nll / tokens), rel=1e-5)
    assert model.training  # the mode is restored


def test_no_held_out_examples_gives_none():
    model, _ = build_tiny_model(0)
    assert held_out_loss(model, [], packing=False, max_length=8, micro_batch_tokens=8, pad_id=0) is None
