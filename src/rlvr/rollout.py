"""Sampling G completions per prompt (the first step of GRPO, DeepSeekMath Algorithm 1).

The engine works on token ids with a KV cache:

1. the P prompts are left-padded and run through the model **once** (prefill);
2. the prompt cache is repeated G times, so the G completions of a group share it;
3. decoding runs one token at a time for the rows still going; a row that emits a stop token
   leaves the batch (its cache rows are dropped), so finished completions cost nothing.

Each completion draws its random numbers from a seed of its own (rlvr.seeds), so what it samples does
not depend on its batch-mates or on the rank that samples it. Log-probabilities are recorded under the
distribution the token was drawn from: temperature-scaled and, when top-k/top-p truncate it,
renormalised over the kept tokens; the lowest kept (scaled) logit of each position, its support floor,
goes with the rollout, so that the trainer computes its log-probabilities over the same support
(rlvr.logprobs) and the ratio compares like with like.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from rlvr.graphed import StaticDecoder, static_refusal
from rlvr.kv_room import with_room
from rlvr.prepacked import packed_linears
from rlvr.records import Example, Rollout
from rlvr.seeds import uniforms


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0

    @property
    def truncates(self) -> bool:
        """Whether sampling cuts the distribution (top-k / top-p at a temperature above 0): then the rollout
        carries support floors."""
        return self.temperature > 0 and (self.top_k > 0 or self.top_p < 1.0)


@dataclass
class Completions:
    """Raw engine output; rows p·G … p·G + G − 1 belong to prompt p."""

    prompt_ids: torch.Tensor  # [P, Lp] left-padded
    prompt_mask: torch.Tensor  # [P, Lp] bool
    completion_ids: torch.Tensor  # [N, Lc] right-padded
    completion_mask: torch.Tensor  # [N, Lc] bool
    logprobs: torch.Tensor  # [N, Lc] under the distribution sampled from (truncated and renormalised)
    truncated: torch.Tensor  # [N] bool
    support_floors: torch.Tensor | None  # [N, Lc] the lowest kept scaled logit (−inf: whole vocabulary); None: none cut


def left_pad(sequences: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (ids [B, L], mask [B, L]) padded on the left.

    >>> ids, mask = left_pad([[5, 6], [7]], pad_id=0)
    >>> ids.tolist(), mask.int().tolist()
    ([[5, 6], [0, 7]], [[1, 1], [0, 1]])
    """
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.bool)
    for row, seq in enumerate(sequences):
        if seq:
            ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[row, width - len(seq) :] = True
    return ids, mask


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that ignore left padding: [B, L] bool -> [B, L] long."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def sample_next(
    logits: torch.Tensor, params: SamplingParams, u: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """logits [B, V], uniforms u [B] in [0, 1) -> (token [B], its log-prob [B], support floor [B]) under the
    temperature-scaled softmax, renormalised over what top-k / top-p keep: the distribution it is drawn
    from. The floor separates the kept scaled logits from the cut ones (−inf when nothing is cut; greedy:
    −inf, its log-prob the untruncated one at temperature 1)."""
    floor = torch.full(logits.shape[:1], float("-inf"), device=logits.device)
    if params.temperature == 0:
        token = logits.argmax(-1)
        return token, torch.log_softmax(logits.float(), -1).gather(-1, token[:, None]).squeeze(-1), floor
    scaled = logits.float() / params.temperature
    filtered = scaled
    if params.top_k > 0 and params.top_k < filtered.shape[-1]:
        kth = filtered.topk(params.top_k, dim=-1).values[:, -1:]
        filtered = filtered.masked_fill(filtered < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = filtered.sort(-1, descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        # drop a token once the mass *before* it already reaches top_p (the top token always stays)
        drop_sorted = (cumulative - sorted_logits.softmax(-1)) >= params.top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        filtered = filtered.masked_fill(drop, float("-inf"))
    if filtered is not scaled:  # cut: the floor sits halfway between the lowest logit kept and the highest cut,
        # so that a recomputation off by rounding (the trainer's forward) keeps the same tokens
        cut = filtered == float("-inf")
        lowest_kept = scaled.masked_fill(cut, float("inf")).amin(-1)
        highest_cut = scaled.masked_fill(~cut, float("-inf")).amax(-1)
        floor = torch.where(highest_cut > float("-inf"), (lowest_kept + highest_cut) / 2, floor)
    logprobs = torch.log_softmax(filtered, -1)
    # one uniform per row, where torch.multinomial draws one per vocabulary entry (an exponential race): with
    # a 49k vocabulary, that drawing took 12% of a CPU rollout
    token = token_at(filtered.softmax(-1), (torch.rand(len(logits)) if u is None else u).to(logits.device)[:, None])
    return token, logprobs.gather(-1, token[:, None]).squeeze(-1), floor


def token_at(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """probs [B, V], u [B, 1] in [0, 1) -> [B]: the first token whose cumulative probability exceeds u·total.

    The cumulative sum is in fp64 so that small probabilities keep their share, and u·total stays below the
    total, so a token of probability 0 (cut by top-k / top-p) is never chosen: cdf[j] > v ≥ cdf[j−1] means
    p_j > 0."""
    cdf = probs.double().cumsum(-1)
    total = cdf[:, -1:]
    v = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, v, right=True).squeeze(-1)


@torch.no_grad()
def generate(
    model: torch.nn.Module,
    prompts: list[list[int]],
    group_size: int,
    params: SamplingParams,
    *,
    stop_ids: list[int],
    pad_id: int,
    seeds: list[int] | None = None,
    on_group_done: Callable[[int, torch.Tensor, torch.Tensor], None] | None = None,
    static: bool = False,
) -> Completions:
    """Sample `group_size` completions for each prompt (token ids in, token ids out); row p·G + j draws from
    `seeds[p·G + j]` (rlvr.seeds; None: torch's global generator).

    `on_group_done(p, ids [G, max_new_tokens], lengths [G])` is called as soon as every completion
    of prompt p has finished, while the other groups are still decoding (so their rewards can be
    computed meanwhile); groups cut at max_new_tokens are reported at the end. `static`: decode over a static
    cache, the step a CUDA graph on a GPU (rlvr.graphed), where the model allows it (else as without).
    """
    device = next(model.parameters()).device
    prompt_ids, prompt_mask = left_pad(prompts, pad_id)
    cache, logits, attention, next_pos = _prefill(model, prompt_ids.to(device), prompt_mask.to(device), group_size)
    rows = (model, with_room(cache, params.max_new_tokens), group_size, attention, next_pos)
    static = static and static_refusal(model) is None
    decoder = StaticDecoder(*rows, params.max_new_tokens, device.type == "cuda") if static else Shrinking(*rows)
    n = len(prompts) * group_size
    completion_ids = torch.full((n, params.max_new_tokens), pad_id, dtype=torch.long)
    logprobs = torch.zeros((n, params.max_new_tokens))
    floors = torch.full((n, params.max_new_tokens), float("-inf"))
    lengths = torch.zeros(n, dtype=torch.long)
    finished = torch.zeros(n, dtype=torch.bool)
    active = torch.arange(n)
    stop = torch.tensor(stop_ids, device=device)
    groups = _GroupTracker(len(prompts), group_size, completion_ids, lengths, on_group_done)
    with packed_linears(model, params.max_new_tokens):  # (a CPU's decoding steps: rlvr.prepacked)
        for t in range(params.max_new_tokens):
            u = uniforms([seeds[i] for i in active.tolist()], t) if seeds is not None and params.temperature else None
            token, token_logprob, floor = sample_next(logits, params, u)
            completion_ids[active, t] = token.cpu()
            logprobs[active, t] = token_logprob.cpu()
            floors[active, t] = floor.cpu()
            lengths[active] += 1
            done = torch.isin(token, stop)
            finished[active[done.cpu()]] = True
            groups.finished(active[done.cpu()].tolist())
            if t == params.max_new_tokens - 1 or bool(done.all()):
                break
            if bool(done.any()):
                keep = (~done).nonzero().squeeze(-1)
                decoder.drop(keep)
                active, token = active[keep.cpu()], token[keep]
            logits = decoder.step(token)

    groups.report_the_rest()
    width = int(lengths.max()) if n else 0
    completion_mask = torch.arange(width)[None, :] < lengths[:, None]
    return Completions(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=completion_ids[:, :width],
                       completion_mask=completion_mask, logprobs=logprobs[:, :width] * completion_mask,
                       truncated=~finished, support_floors=floors[:, :width] if params.truncates else None)


def _prefill(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor,
             group_size: int) -> tuple[DynamicCache, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run the P prompts once: (their cache, one row per prompt; logits [N, V], attention [N, Lp] and next
    position [N] of the N = P·G rows)."""
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask), past_key_values=DynamicCache(),
                use_cache=True, logits_to_keep=1)
    logits = out.logits[:, -1].repeat_interleave(group_size, 0)
    return (out.past_key_values, logits, mask.repeat_interleave(group_size, 0),
            mask.long().sum(-1).repeat_interleave(group_size, 0))


class Shrinking:
    """The decode steps over the prompts' cache repeated G times, from which finished completions leave: nothing
    more is computed for them (the batch shrinks)."""

    def __init__(self, model: torch.nn.Module, prefill: DynamicCache, group_size: int, attention: torch.Tensor,
                 next_pos: torch.Tensor) -> None:
        prefill.batch_repeat_interleave(group_size)
        self.model, self.cache, self.attention, self.next_pos = model, prefill, attention, next_pos

    def drop(self, keep: torch.Tensor) -> None:
        self.cache.batch_select_indices(keep)
        self.attention, self.next_pos = self.attention[keep], self.next_pos[keep]

    def step(self, token: torch.Tensor) -> torch.Tensor:
        """The next logits of the rows, given the token each just drew."""
        self.attention = torch.cat([self.attention, self.attention.new_ones(len(token), 1)], dim=-1)
        out = self.model(input_ids=token[:, None], attention_mask=self.attention, position_ids=self.next_pos[:, None],
                         past_key_values=self.cache, use_cache=True)
        self.next_pos = self.next_pos + 1
        return out.logits[:, -1]  # type: ignore[no-any-return]


class _GroupTracker:
    """Counts each group's unfinished completions and hands a group over the moment it completes."""

    def __init__(self, num_prompts: int, group_size: int, ids: torch.Tensor, lengths: torch.Tensor,
                 callback: Callable[[int, torch.Tensor, torch.Tensor], None] | None) -> None:
        self.left, self.g = [group_size] * num_prompts, group_size
        self.ids, self.lengths, self.callback = ids, lengths, callback

    def finished(self, rows: list[int]) -> None:
        for row in rows:
            self.left[row // self.g] -= 1
            if self.left[row // self.g] == 0:
                self._report(row // self.g)

    def report_the_rest(self) -> None:
        """Groups with completions cut at max_new_tokens."""
        for p, left in enumerate(self.left):
            if left > 0:
                self._report(p)

    def _report(self, p: int) -> None:
        if self.callback is not None:
            rows = slice(p * self.g, (p + 1) * self.g)
            self.callback(p, self.ids[rows].clone(), self.lengths[rows].clone())


def rollout(
    model: torch.nn.Module,
    tokenizer: Any,
    examples: list[Example],
    prompt_texts: list[str],
    group_size: int,
    params: SamplingParams,
    *,
    seeds: list[int] | None = None,
    add_special_tokens: bool = False,
    on_group_done: Callable[[int, list[str], list[list[int]]], None] | None = None,
    static: bool = False,
) -> Rollout:
    """Sample a group of completions for each example and decode them into a Rollout record.

    `on_group_done(p, texts, token_ids)` receives each group as soon as it is complete; `static`: as generate's.
    """
    prompts = [tokenizer(text, add_special_tokens=add_special_tokens).input_ids for text in prompt_texts]
    stop_ids = stop_token_ids(model, tokenizer)
    decode: Callable[[torch.Tensor, torch.Tensor], list[str]] = lambda ids, mask: tokenizer.batch_decode(  # noqa: E731
        ids.masked_fill(~mask, tokenizer.pad_token_id), skip_special_tokens=True)

    def group_done(p: int, ids: torch.Tensor, lengths: torch.Tensor) -> None:
        mask = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
        assert on_group_done is not None  # (passed to generate only with one)
        on_group_done(p, decode(ids, mask), [row[m].tolist() for row, m in zip(ids, mask)])

    out = generate(model, prompts, group_size, params, stop_ids=stop_ids, pad_id=tokenizer.pad_token_id,
                   seeds=seeds, on_group_done=group_done if on_group_done else None, static=static)
    texts = decode(out.completion_ids, out.completion_mask)
    return Rollout(
        examples=examples,
        group_size=group_size,
        prompt_ids=out.prompt_ids,
        prompt_mask=out.prompt_mask,
        completion_ids=out.completion_ids,
        completion_mask=out.completion_mask,
        sampling_logprobs=out.logprobs,
        truncated=out.truncated,
        completions=texts,
        support_floors=out.support_floors,
    )


def stop_token_ids(model: torch.nn.Module, tokenizer: Any) -> list[int]:
    """The tokens that end a completion: the tokenizer's EOS and those the model's generation config adds."""
    return sorted({tokenizer.eos_token_id, *_extra_stop_ids(model)} - {None})


def _extra_stop_ids(model: torch.nn.Module) -> list[int]:
    """Stop tokens the model's generation config declares besides the tokenizer's EOS."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        return []
    return list(eos) if isinstance(eos, (list, tuple)) else [eos]
