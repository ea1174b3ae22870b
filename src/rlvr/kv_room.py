"""A decoding KV cache with room for the tokens to come, so that a step writes its keys and values in place.

transformers' DynamicCache appends each step's keys and values with `torch.cat`: every step copies the whole
cache of every layer into a new tensor, work that grows with the length decoded (quadratic over a decoding),
and the fresh tensors churn the heap. Decoding SmolLM2-135M's shape (a random network, 32 rows from 90-token
prompts, 128 tokens, 2 threads, on an Intel Xeon with AMX, 2026-12-02) took 10.9 s that way and 8.8 s with room
made once for every token in bf16 (the linear layers packed for oneDNN), 14.5-15.3 s and 12.9-13.6 s in fp32
(docs/performance.md): the same keys and values in the same order, so the same attention and the same tokens.

Each layer of the prompts' cache becomes a `RoomyLayer`: its keys and values live in buffers with room for
`room` more tokens, `keys` / `values` the views of what is filled (what attention and transformers read). The
buffers take the dtype the first decoding step brings where it is wider (the prompts' pass under bf16
autocast caches bf16, a packed decoding step fp32: joined in fp32, as `torch.cat` promotes them). A model
whose cache is not DynamicLayers (sliding windows, a transformers before the layered cache) keeps its own.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class RoomyLayer(DynamicLayer):  # type: ignore[no-untyped-call]
    """A DynamicLayer whose keys and values are views of buffers with room for more tokens."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, room: int) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.device, self.is_initialized, self.room = keys.device, True, room
        self.filled = keys.shape[-2]
        self.buffers: list[torch.Tensor] | None = None
        self.keys, self.values = keys, values  # (until the first step sizes the buffers)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        new, keys, values = key_states.shape[-2], self.keys, self.values
        assert keys is not None and values is not None
        dtype = torch.promote_types(keys.dtype, key_states.dtype)
        if self.buffers is None or self.filled + new > self.buffers[0].shape[-2] or self.buffers[0].dtype != dtype:
            self.buffers = [self._roomy(filled, dtype, new) for filled in (keys, values)]
        for buffer, states in zip(self.buffers, (key_states, value_states), strict=True):
            buffer[:, :, self.filled:self.filled + new] = states
        self.filled += new
        self.keys, self.values = (buffer[:, :, :self.filled] for buffer in self.buffers)
        return self.keys, self.values

    def _roomy(self, filled: torch.Tensor, dtype: torch.dtype, new: int) -> torch.Tensor:
        """A buffer of `dtype` holding `filled`, with room for `new` tokens and `room` more."""
        batch, heads, length, width = filled.shape
        buffer = filled.new_empty((batch, heads, length + new + self.room, width), dtype=dtype)
        buffer[:, :, :length] = filled
        return buffer

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.buffers is not None:
            self.buffers = [buffer[indices] for buffer in self.buffers]
            self.keys, self.values = (buffer[:, :, :self.filled] for buffer in self.buffers)
        else:
            assert self.keys is not None and self.values is not None
            self.keys, self.values = self.keys[indices], self.values[indices]

    def batch_repeat_interleave(self, repeats: int) -> None:
        self.buffers = None
        assert self.keys is not None and self.values is not None
        self.keys, self.values = (t.repeat_interleave(repeats, dim=0) for t in (self.keys, self.values))

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("a RoomyLayer only grows (rlvr.kv_room)")


def with_room(cache: DynamicCache, room: int) -> DynamicCache:
    """`cache` (the prompts' pass) with each DynamicLayer made a RoomyLayer with room for `room` tokens, in place;
    a cache of other layers as it is."""
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer or not layer.is_initialized for layer in layers):
        return cache
    cache.layers = [RoomyLayer(layer.keys, layer.values, room) for layer in layers]
    return cache
