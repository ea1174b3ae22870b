"""Per-token log-probabilities of completions under a model (policy or reference).

Two savings over the obvious `model(prompt + completion).logits`:

- **The prompt is computed once per group.** Its keys and values are computed for the P prompts
  and reused by every completion of the group; in training, the gradient reaching the prompt
  is the sum over all the completions that attended to it — the same as G separate copies.
- **No logits beyond the completions.** Only completion positions go through the output layer, in chunks
  (`_SelectiveLogSoftmax`, a hand-written gradient: onehot − softmax). The backward takes each chunk's softmax
  kept from the forward, which becomes its gradient in place: [tokens × vocabulary] floats in fp32, what a
  plain backward keeps too. Under activation checkpointing, where memory comes first, nothing is kept and the
  backward recomputes a chunk's logits: one [tokens × hidden × vocabulary] product more per chunk (5% of
  the forward and backward of SmolLM2-135M's 32 completions on a CPU in fp32: docs/performance.md).

Where the sampler cut the distribution (top-k / top-p), each position's log-prob is renormalised over the
tokens it kept: the logits below its support floor (rlvr.rollout) are left out of the softmax, in the
forward and in the backward, so the trainer's log π is that of the distribution the token was drawn from.
The sampled token itself always stays in (its logit sits at or above the floor where it was sampled).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from transformers import DynamicCache

from rlvr.models.adapters import decoder
from rlvr.rollout import positions

T = TypeVar("T")

CHUNK_TOKENS = 512


@dataclass
class TokenStats:
    logprobs: torch.Tensor  # [m, Lc] log π(token) at temperature, 0 at padding
    entropy: torch.Tensor  # [m, Lc] entropy of π at each position (detached), 0 at padding


def _wide(x: torch.Tensor) -> torch.Tensor:
    """At least fp32 (bf16/fp16 are widened; fp64 stays)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _logits(hidden: torch.Tensor, weight: torch.Tensor, temperature: float, targets: torch.Tensor,
            floors: torch.Tensor | None) -> torch.Tensor:
    """[T, V] temperature-scaled logits; below a position's support floor (not its target): the lowest finite
    value, which the softmax gives probability 0 (finite, so the entropy's p·logit stays 0, not NaN)."""
    logits = _wide(hidden @ weight.T)
    logits = logits if temperature == 1.0 else logits.div_(temperature)
    if floors is not None:
        cut = logits < floors[:, None].to(logits.dtype)
        cut.scatter_(-1, targets[:, None], False)
        logits = logits.masked_fill_(cut, torch.finfo(logits.dtype).min)
    return logits


class _SelectiveLogSoftmax(torch.autograd.Function):
    """(log-prob of the target [T], entropy [T]) from hidden [T, H] and the output layer [V, H].

    Saves the inputs, the log-normaliser and, when `keep`, the softmax [T, V]; the backward forms
    d log p / d logits = onehot(target) − softmax in place, on the kept softmax or on the chunk's logits
    recomputed (in fp32 the same numbers: the same product of the same inputs; under autocast the kept softmax is
    the forward's, of its bf16 product, where the recomputation runs in fp32), so without `keep` a chunk costs two
    [T, V] buffers at most, in either direction (the temperature's 1/T scales each token's upstream gradient,
    not the [T, V] buffer). The entropy is a statistic: no gradient flows from it.
    """

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, temperature: float,
                floors: torch.Tensor | None, keep: bool) -> tuple[torch.Tensor, torch.Tensor]:
        logits = _logits(hidden, weight, temperature, targets, floors)
        lse = torch.logsumexp(logits, dim=-1)
        target_logit = logits.gather(-1, targets[:, None]).squeeze(-1)
        probs = (logits - lse[:, None]).exp_()
        entropy = lse - torch.linalg.vecdot(probs, logits)
        ctx.save_for_backward(hidden, weight, targets, lse, floors, probs if keep else None)
        ctx.temperature = temperature
        ctx.mark_non_differentiable(entropy)
        return target_logit - lse, entropy

    @staticmethod
    def backward(ctx: Any, grad_logprob: torch.Tensor, _grad_entropy: torch.Tensor
                 ) -> tuple[torch.Tensor | None, torch.Tensor | None, None, None, None, None]:
        hidden, weight, targets, lse, floors, probs = ctx.saved_tensors
        t = ctx.temperature
        scale = grad_logprob / t  # (the logits are z / T: d/dz is 1/T of d/dlogits, a factor per token)
        hidden_w = _wide(hidden)
        weight_w = weight.to(hidden_w.dtype)
        if probs is not None:  # (in place: a second backward, retain_graph, is refused by torch's version check)
            grad = probs.mul_(-scale[:, None].to(probs.dtype))
        else:
            grad = _logits(hidden_w, weight_w, t, targets, floors).sub_(lse[:, None]).exp_().mul_(-scale[:, None])
        grad.scatter_add_(-1, targets[:, None], scale[:, None].to(grad.dtype))
        grad_hidden = (grad @ weight_w).to(hidden.dtype) if ctx.needs_input_grad[0] else None
        grad_weight = (grad.T @ hidden_w).to(weight.dtype) if ctx.needs_input_grad[1] else None
        return grad_hidden, grad_weight, None, None, None, None


def selective_logprobs(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0,
    chunk: int = CHUNK_TOKENS, floors: torch.Tensor | None = None, keep: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """log softmax(hidden·Wᵀ / T)[target] and the entropy, chunk by chunk, over the logits at or above each
    position's support floor when `floors` [T] is given. [T, H] -> ([T], [T]).
    `keep`: with gradients, keep every chunk's softmax ([T, V] in all) for the backward instead of recomputing
    its logits there.
    No token (T = 0, a micro-batch of empty rows) still gives log-probs of the graph, so a backward through
    them runs (gradients of zero: every data-parallel rank's backward must run, it all-reduces them)."""
    keep = keep and torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    out_lp, out_ent = [hidden.new_zeros(0, dtype=torch.float32)], [hidden.new_zeros(0, dtype=torch.float32)]
    for start in range(0, max(1, hidden.shape[0]), chunk):
        part = slice(start, start + chunk)
        lp, ent = _SelectiveLogSoftmax.apply(hidden[part], weight, targets[part], temperature,  # type: ignore[no-untyped-call]
                                             None if floors is None else floors[part], keep)
        out_lp.append(lp)
        out_ent.append(ent)
    return torch.cat(out_lp), torch.cat(out_ent)


def length_buckets(lengths: list[int], min_gain: int = 16) -> list[list[int]]:
    """Split row indices, sorted by length, into buckets that each pad to their own longest row.

    A new bucket starts when the next row is more than twice as long as the bucket's shortest
    (and at least `min_gain` tokens longer), so one long completion does not pad a group of short ones.

    >>> length_buckets([5, 60, 6, 7])
    [[0, 2, 3], [1]]
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    buckets: list[list[int]] = []
    for i in order:
        if buckets and not (lengths[i] > 2 * lengths[buckets[-1][0]]
                            and lengths[i] - lengths[buckets[-1][0]] >= min_gain):
            buckets[-1].append(i)
        else:
            buckets.append([i])
    return buckets


class PolicyModule(torch.nn.Module):
    """The policy as the one module DDP and FSDP wrap: its forward *is* `completion_logprobs`.

    Those wrappers act only through `forward`'s hooks, while `completion_logprobs` reads the backbone and
    the output layer directly; called on a wrapped model, gradients would skip the all-reduce and the
    replicas drift apart without an error. Calling this module keeps the log-probs inside the hooks.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, row_prompt: torch.Tensor,
                completion_ids: torch.Tensor, completion_mask: torch.Tensor, temperature: float = 1.0,
                share_prompt: bool = True, support_floors: torch.Tensor | None = None) -> TokenStats:
        return completion_logprobs(self.model, prompt_ids, prompt_mask, row_prompt, completion_ids, completion_mask,
                                   temperature, share_prompt, support_floors)

    def sample(self, fn: Callable[[torch.nn.Module], T]) -> T:
        """`fn(model)`, for decoding, which calls the model outside `forward`: FSDP registers this method as a
        forward of its own, so the weights it holds at this level are whole meanwhile (rlvr.distributed.parallel)."""
        return fn(self.model)


def completion_logprobs(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    row_prompt: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: float = 1.0,
    share_prompt: bool = True,
    support_floors: torch.Tensor | None = None,
) -> TokenStats:
    """Log-probabilities of each completion token given its prompt.

    prompt_ids / prompt_mask [p, Lp] (left-padded); row_prompt [m] says which prompt each
    completion continues; completion_ids / completion_mask [m, Lc] (right-padded); support_floors
    [m, Lc] where the sampler cut the distribution (see the module docstring).
    Returns [m, Lc] tensors; gradients flow when enabled.
    """
    device = next(model.parameters()).device
    prompt_ids, prompt_mask, row_prompt = prompt_ids.to(device), prompt_mask.to(device), row_prompt.to(device)
    completion_ids, completion_mask = completion_ids.to(device), completion_mask.to(device)
    backbone = decoder(model)
    checkpointed = getattr(backbone, "gradient_checkpointing", False)  # (memory first: nothing kept)
    if share_prompt and not checkpointed:
        predicting = _hidden_shared_prompt(backbone, prompt_ids, prompt_mask, row_prompt, completion_ids,
                                           completion_mask)
    else:
        predicting = predicting_hidden(backbone, prompt_ids[row_prompt], prompt_mask[row_prompt], completion_ids,
                                       completion_mask)
    mask = completion_mask
    floors = None if support_floors is None else support_floors.to(device)[mask]
    lp, ent = selective_logprobs(predicting[mask], model.get_output_embeddings().weight,  # type: ignore[operator]
                                 completion_ids[mask], temperature, floors=floors, keep=not checkpointed)
    logprobs = torch.zeros(mask.shape, dtype=lp.dtype, device=device).masked_scatter(mask, lp)
    entropy = torch.zeros(mask.shape, dtype=ent.dtype, device=device).masked_scatter(mask, ent.detach())
    return TokenStats(logprobs=logprobs, entropy=entropy)


def predicting_hidden(backbone: torch.nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                      completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """The plain way: one forward over prompt + completion per row -> hidden states predicting each
    completion token [m, Lc, H]."""
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention = torch.cat([prompt_mask, completion_mask], dim=1)
    hidden: torch.Tensor = backbone(input_ids=input_ids, attention_mask=attention,
                                    position_ids=positions(attention)).last_hidden_state
    lp = prompt_ids.shape[1]
    # the hidden state at position j predicts token j + 1: completion token t is predicted at Lp − 1 + t
    return hidden[:, lp - 1 : lp - 1 + completion_ids.shape[1]]


def _rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[index] along the first dimension, as a product with a one-hot matrix: its backward sums the rows that
    share a prompt by a matrix product, in a fixed order (indexing's backward accumulates them by index_put,
    whose order on a CPU varies from call to call once the tensors are large: a resumed run would not be exact)."""
    one_hot = torch.nn.functional.one_hot(index, x.shape[0]).to(x.dtype)
    with torch.autocast(x.device.type, enabled=False):  # (in x's own precision: the rows exactly, their dtype)
        return (one_hot @ x.flatten(1)).view(len(index), *x.shape[1:])


def _hidden_shared_prompt(backbone: torch.nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                          row_prompt: torch.Tensor, completion_ids: torch.Tensor,
                          completion_mask: torch.Tensor) -> torch.Tensor:
    """Prompt forward once, then each length bucket of completions attends to the cached prompt."""
    cache = DynamicCache()
    out = backbone(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions(prompt_mask),
                   past_key_values=cache, use_cache=True)
    prompt_kv = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
    last_prompt_hidden = out.last_hidden_state[:, -1]  # [p, H] predicts the first completion token
    prompt_len = prompt_mask.sum(-1)
    m, lc = completion_ids.shape
    predicting = completion_ids.new_zeros((m, lc, last_prompt_hidden.shape[-1]), dtype=last_prompt_hidden.dtype)
    first_positions = (torch.arange(m, device=predicting.device),
                       torch.zeros(m, dtype=torch.long, device=predicting.device))
    predicting = predicting.index_put(first_positions, _rows(last_prompt_hidden, row_prompt))
    lengths = completion_mask.sum(-1).tolist()
    for bucket in length_buckets(lengths):
        rows = torch.tensor(bucket, device=completion_ids.device)
        width = max(1, max(lengths[i] for i in bucket))
        if width == 1:
            continue  # a one-token completion is predicted by the prompt alone
        src = row_prompt[rows]
        sub_cache = DynamicCache(ddp_cache_data=[(_rows(k, src), _rows(v, src)) for k, v in prompt_kv])
        fed = slice(0, width - 1)  # (the last token predicts nothing here)
        ids, cmask = completion_ids[rows, fed], completion_mask[rows, fed]
        attention = torch.cat([prompt_mask[src], cmask], dim=1)
        pos = prompt_len[src, None] + torch.arange(width - 1, device=ids.device)[None, :]
        hidden = backbone(input_ids=ids, attention_mask=attention, position_ids=pos, past_key_values=sub_cache,
                          use_cache=True).last_hidden_state
        predicting = predicting.index_put((rows[:, None], torch.arange(1, width, device=ids.device)[None, :]), hidden)
    return predicting
