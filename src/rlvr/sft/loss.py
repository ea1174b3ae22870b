"""The SFT loss: negative log-likelihood of the trained (completion) tokens.

The step's loss is the token mean over the whole batch, Σ nll / (trained tokens in the batch),
so every completion token weighs the same whatever the length of its example, and micro-batching
or packing cannot change it: each micro-batch contributes its *sum* divided by the batch's count.
Log-probabilities go through rlvr.logprobs.selective_logprobs (chunked and checkpointed), so only
the trained positions meet the output layer and no [tokens × vocabulary] tensor is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from rlvr.distributed.world import SINGLE, World, shard, sum_across
from rlvr.logprobs import selective_logprobs
from rlvr.models.adapters import decoder
from rlvr.sft.data import SFTExample
from rlvr.sft.packing import MicroBatch, attention_bias, loss_targets, micro_batches


@dataclass
class TokenNLL:
    total: torch.Tensor  # [] Σ −log π(token) over the trained tokens (with gradients in training)
    tokens: int  # how many trained tokens
    entropy: float  # Σ entropy of π at those positions (detached)


def completion_nll(model: torch.nn.Module, batch: MicroBatch) -> TokenNLL:
    """Summed NLL of `batch`'s trained tokens under `model` (a causal LM: backbone + output layer; the step
    runs it as an NLLModule, through the ranks' wrapper: rlvr.distributed.parallel.Trained)."""
    param = next(model.parameters())
    ids, positions, segments = (t.to(param.device) for t in (batch.input_ids, batch.position_ids, batch.segment_ids))
    backbone = decoder(model)
    hidden = backbone(input_ids=ids, attention_mask=attention_bias(segments, param.dtype),
                      position_ids=positions).last_hidden_state
    targets, trained = (t.to(param.device) for t in loss_targets(batch))
    logprobs, entropy = selective_logprobs(hidden[:, :-1][trained],
                                           model.get_output_embeddings().weight,  # type: ignore[operator]
                                           targets[trained])
    return TokenNLL(total=-logprobs.sum(), tokens=int(trained.sum()), entropy=float(entropy.sum()))


class NLLModule(torch.nn.Module):
    """A causal LM whose forward is `completion_nll`: the one module DDP wraps, so that its gradient
    hooks run (calling completion_nll on the bare model would skip them)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, batch: MicroBatch) -> TokenNLL:
        return completion_nll(self.model, batch)


@torch.no_grad()
def held_out_loss(model: torch.nn.Module, examples: list[SFTExample], *, packing: bool, max_length: int,
                  micro_batch_tokens: int, pad_id: int, world: World = SINGLE) -> dict[str, Any] | None:
    """Token-mean NLL of `examples` (and its perplexity) in eval mode; None when there are none.
    Data-parallel, each rank measures its share and the sums are added up."""
    if not examples:
        return None
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    try:
        for mb in micro_batches(shard(examples, world), packing=packing, max_length=max_length,
                                micro_batch_tokens=micro_batch_tokens, pad_id=pad_id):
            nll = completion_nll(model, mb)
            total, tokens = total + float(nll.total), tokens + nll.tokens
    finally:
        model.train(was_training)
    total, summed_tokens = sum_across([total, tokens], world)
    tokens = int(summed_tokens)
    loss = total / tokens
    return {"examples": len(examples), "tokens": tokens, "loss": loss, "perplexity": math.exp(min(loss, 50.0))}
