"""The decoding batch of a multi-turn rollout, with each row's KV cache kept across its turns.

Rows come and go: a row leaves when its message ends (`park`: its cache rows are cut out and kept) and
comes back with the tokens it has not run yet (`join`: the environment's reply, the template's turn
markers) to be prefilled on top of its own cache. So a conversation's transcript is run through the
model once, token by token or chunk by chunk, never prefilled again.

Rows have different histories in one cache tensor [B, H, L, D], so the attention mask [B, L] has holes:
columns a row does not own (left padding when it joined a longer batch, padding inside a chunk, the
tokens of a message cut back to its tool call). Positions are counted per row over its own tokens, so
a row computes what it would compute alone (to the last bits of a batched matmul).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from rlvr.errors import UserError


@dataclass
class Parked:
    """A row out of the batch: its cache [1, H, L, D] per layer (keys, values), mask [L], next position."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    mask: torch.Tensor
    position: int

    def forget_last(self, n: int) -> None:
        """Hide the last `n` tokens the row ran (a message cut back to its tool call)."""
        if n <= 0:
            return
        owned = self.mask.nonzero().squeeze(-1)
        self.mask[owned[-n:]] = False
        self.position -= n


class KVBatch:
    """Rows (trajectory indices) decoding together; see the module docstring."""

    def __init__(self, model: torch.nn.Module, pad_id: int) -> None:
        self.model, self.pad_id = model, pad_id
        self.device = next(model.parameters()).device
        self.rows: list[int] = []
        self.cache: DynamicCache | None = None
        self.mask = torch.zeros((0, 0), dtype=torch.bool, device=self.device)
        self.position = torch.zeros(0, dtype=torch.long, device=self.device)
        self.pending: dict[int, list[int]] = {}  # tokens each row feeds in the next forward

    def park(self, rows: list[int]) -> dict[int, Parked]:
        """Take `rows` out of the batch, each with its cache (one copy of the cache for all of them)."""
        leaving = {self.rows.index(r): r for r in rows}
        parked = {r: Parked([(layer.keys[b:b + 1].clone(), layer.values[b:b + 1].clone())
                             for layer in _layers(self.cache)], self.mask[b].clone(), int(self.position[b]))
                  for b, r in leaving.items()}
        keep = [b for b in range(len(self.rows)) if b not in leaving]
        self.rows = [self.rows[b] for b in keep]
        for r in rows:
            self.pending.pop(r, None)
        index = torch.tensor(keep, dtype=torch.long, device=self.device)
        self.mask, self.position = self.mask[index], self.position[index]
        if self.rows:
            assert self.cache is not None  # rows in the batch have run a forward, which set the cache
            self.cache.batch_select_indices(index)
            self._trim()
        else:
            self.cache, self.mask = None, self.mask[:, :0]
        return parked

    def admit(self, entries: list[tuple[int, Parked | None, list[int]]]) -> torch.Tensor:
        """Bring rows into the batch, each (row, its cache or None for a fresh prompt, tokens to run): their
        tokens are prefilled together in a forward of their own, so the rows decoding meanwhile run one
        token each, not a padded chunk. Returns the newcomers' next-token logits [len(entries), V]."""
        newcomers = KVBatch(self.model, self.pad_id)
        caches = [parked for _, parked, _ in entries if parked is not None]
        if caches and len(caches) < len(entries):
            raise ValueError("fresh rows join only with other fresh rows (all prompts start together)")
        if caches:
            width = max(p.mask.shape[0] for p in caches)
            newcomers.cache = DynamicCache(ddp_cache_data=[
                (torch.cat([_pad_left(p.layers[i][0], width - p.mask.shape[0]) for p in caches]),
                 torch.cat([_pad_left(p.layers[i][1], width - p.mask.shape[0]) for p in caches]))
                for i in range(len(caches[0].layers))])
            newcomers.mask = torch.stack([_pad_left(p.mask[None], width - p.mask.shape[0])[0] for p in caches])
            newcomers.position = torch.tensor([p.position for p in caches], device=self.device)
            runs = [tokens for _, _, tokens in entries]
            copies = None
        else:  # fresh prompts: each distinct one is prefilled once (a group's G samples share it)
            distinct = list(dict.fromkeys(tuple(tokens) for _, _, tokens in entries))
            runs = [list(tokens) for tokens in distinct]
            newcomers.mask = torch.zeros((len(runs), 0), dtype=torch.bool, device=self.device)
            newcomers.position = torch.zeros(len(runs), dtype=torch.long, device=self.device)
            copies = torch.tensor([distinct.index(tuple(tokens)) for _, _, tokens in entries], device=self.device)
        newcomers.rows = list(range(len(runs)))
        newcomers.pending = {i: list(tokens) for i, tokens in enumerate(runs)}
        logits = newcomers.forward()
        if copies is not None:  # each prefilled prompt's cache, once for every row that asked it
            assert newcomers.cache is not None  # set by the forward above
            newcomers.cache.batch_select_indices(copies)
            newcomers.mask, newcomers.position = newcomers.mask[copies], newcomers.position[copies]
            logits = logits[copies]
        newcomers.rows = [row for row, _, _ in entries]
        self._merge(newcomers)
        return logits

    @torch.no_grad()
    def forward(self) -> torch.Tensor:
        """Run every row's pending tokens (left-padded into one chunk): the next-token logits [B, V]."""
        width = max(len(self.pending[r]) for r in self.rows)
        ids = torch.full((len(self.rows), width), self.pad_id, dtype=torch.long)
        chunk = torch.zeros((len(self.rows), width), dtype=torch.bool)
        for b, row in enumerate(self.rows):
            tokens = self.pending[row]
            if not tokens:
                raise ValueError("a row in the batch has no token to run")
            ids[b, width - len(tokens):] = torch.tensor(tokens, dtype=torch.long)
            chunk[b, width - len(tokens):] = True
        chunk = chunk.to(self.device)
        positions = (self.position[:, None] + chunk.long().cumsum(-1) - 1).clamp(min=0)
        self.mask = torch.cat([self.mask, chunk], dim=-1)
        out = self.model(input_ids=ids.to(self.device), attention_mask=self.mask, position_ids=positions,
                         past_key_values=self.cache if self.cache is not None else DynamicCache(), use_cache=True,
                         logits_to_keep=1)
        self.cache = out.past_key_values
        _layers(self.cache)  # fails now, clearly, for a cache this batch cannot split by row
        self.position = self.position + chunk.sum(-1)
        self.pending = {}
        return cast(torch.Tensor, out.logits[:, -1])

    def feed(self, row: int, token: int) -> None:
        self.pending[row] = [token]

    def _merge(self, other: KVBatch) -> None:
        """Append `other`'s rows (their caches aligned on the right, holes on the left)."""
        if self.cache is None:
            self.rows, self.cache, self.mask, self.position = other.rows, other.cache, other.mask, other.position
            return
        width = max(self.mask.shape[1], other.mask.shape[1])
        self._pad_left(width - self.mask.shape[1])
        other._pad_left(width - other.mask.shape[1])
        for mine, theirs in zip(_layers(self.cache), _layers(other.cache)):
            mine.keys, mine.values = torch.cat([mine.keys, theirs.keys]), torch.cat([mine.values, theirs.values])
        self.mask = torch.cat([self.mask, other.mask])
        self.position = torch.cat([self.position, other.position])
        self.rows = self.rows + other.rows

    def _trim(self) -> None:
        """Drop leading columns no row owns."""
        owned = self.mask.any(0).nonzero()
        start = int(owned[0]) if len(owned) else self.mask.shape[1]
        if start > 0:
            self.mask = self.mask[:, start:]
            for layer in _layers(self.cache):
                layer.keys, layer.values = layer.keys[:, :, start:], layer.values[:, :, start:]

    def _pad_left(self, n: int) -> None:
        if n > 0:
            self.mask = _pad_left(self.mask, n)
            for layer in _layers(self.cache):
                layer.keys, layer.values = _pad_left(layer.keys, n), _pad_left(layer.values, n)


def _pad_left(x: torch.Tensor, n: int) -> torch.Tensor:
    """`n` zero (or False) columns before x's sequence axis (-2 for a cache [B, H, L, D], -1 for a mask [B, L])."""
    if n <= 0:
        return x
    axis = -1 if x.dim() == 2 else -2
    shape = list(x.shape)
    shape[axis] = n
    return torch.cat([x.new_zeros(shape), x], dim=axis)


class _FilledLayer(Protocol):
    """A `DynamicLayer` a forward has filled: its keys and values [B, H, L, D] are set (not None)."""

    keys: torch.Tensor
    values: torch.Tensor


def _layers(cache: DynamicCache | None) -> list[_FilledLayer]:
    layers = list(cache.layers) if cache is not None else []
    if any(type(layer) is not DynamicLayer for layer in layers):
        kind = next(type(layer).__name__ for layer in layers if type(layer) is not DynamicLayer)
        raise UserError(f"multi-turn rollouts keep each row's KV cache, which needs full-attention layers; this "
                        f"model's cache has {kind} layers: use a model without sliding-window or linear attention")
    return cast(list[_FilledLayer], layers)  # all DynamicLayer (checked above), each filled by the forward
