"""Decoding on a GPU without the launch wall: a static KV cache, and the decode step captured as a CUDA graph.

A GPU decodes a small model's token in a millisecond or two of arithmetic, but one eager forward pass of a
30-layer network launches hundreds of kernels from Python, each waiting on the CPU: ~25 ms a token. A CUDA
graph records the step's kernels once and replays them with one launch (NVIDIA, "CUDA Graphs"; the same idea
as vLLM's and HF's static-cache `reduce-overhead` decoding). A graph replays fixed shapes at fixed addresses,
so the step is made static:

- the KV cache is transformers' `StaticCache`, [rows, heads, prompt + max_new_tokens, dim], filled from the
  prompts' prefill (run once per prompt, then given to the G rows of its group, as rlvr.rollout does);
- every row stays in the batch until the last one finishes (a finished row's tokens are ignored): no row
  leaves, so no shape changes; on a GPU the rows cost little next to the launches saved;
- the attention mask is a boolean [rows, 1, 1, length] buffer (prompt padding off, the columns decoded so far
  on), the tokens, positions and write position are buffers too, filled in place before each replay.

The first step runs eagerly (it initialises what the network builds lazily), the graph is captured at the
second and replayed from then on. Where capture fails (out of memory, an operation a graph cannot hold) the
decoding goes on eagerly with one line saying so. Off a GPU the same static step runs eagerly: that is how the
tests check, on a CPU, that it computes exactly what rlvr.rollout's shrinking batch computes.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from transformers import StaticCache

from rlvr.errors import first_line


def static_refusal(model: torch.nn.Module) -> str | None:
    """Why `model` cannot decode with a static cache here (None: it can): a sliding-window or other non-global
    attention layer (their static layers wrap around), or attention other than SDPA (the boolean mask)."""
    config: Any = getattr(model, "config", None)
    if config is None:
        return "it has no transformers config"
    if getattr(config, "_attn_implementation", "sdpa") != "sdpa":
        return f"its attention is {config._attn_implementation!r}, not 'sdpa'"
    kinds = set(getattr(config, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"} or getattr(config, "use_sliding_window", False):
        return "it has sliding-window attention layers"
    return None


class StaticDecoder:
    """The decode steps of one generate() call over a static cache: `step(tokens)` feeds the active rows' tokens
    and returns their next logits; `drop(keep)` takes rows out of the active set (their slots go on computing)."""

    def __init__(self, model: torch.nn.Module, prefill: Any, group_size: int, attention: torch.Tensor,
                 next_pos: torch.Tensor, max_new_tokens: int, graphs: bool) -> None:
        self.model, self.rows = model, len(next_pos)
        self.prompt_len = attention.shape[1]
        length = self.prompt_len + max_new_tokens
        self.cache = StaticCache(config=model.config, max_cache_len=length)  # type: ignore[arg-type]
        self._fill(prefill, group_size)
        device = next_pos.device
        self.mask = torch.zeros(self.rows, 1, 1, length, dtype=torch.bool, device=device)
        self.mask[:, 0, 0, :self.prompt_len] = attention
        self.tokens = torch.zeros(self.rows, 1, dtype=torch.long, device=device)
        self.pos = next_pos[:, None].clone()
        self.write_at = torch.tensor([self.prompt_len], device=device)
        self.slots = torch.arange(self.rows, device=device)  # the active rows' slots
        self.t = 0
        self.graphs = graphs and device.type == "cuda"
        self.graph: Any = None
        self.logits: torch.Tensor | None = None

    def _fill(self, prefill: Any, group_size: int) -> None:
        """The prompts' keys and values (a DynamicCache of one row per prompt), each given to its group's rows."""
        for index, layer in enumerate(prefill.layers):
            keys, values = (t.repeat_interleave(group_size, 0) for t in (layer.keys, layer.values))
            positions = torch.arange(keys.shape[2], device=keys.device)
            self.cache.update(keys, values, index, {"cache_position": positions})

    def drop(self, keep: torch.Tensor) -> None:
        self.slots = self.slots[keep]

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """The next logits of the active rows, given the token each just drew."""
        self.tokens[self.slots, 0] = tokens
        self.mask[:, 0, 0, self.prompt_len + self.t] = True
        if self.graph is not None:
            self.graph.replay()
        elif self.graphs and self.t == 1:
            self._capture()
        else:
            self.logits = self._forward()
        self.t += 1
        self.pos += 1
        self.write_at += 1
        assert self.logits is not None
        return self.logits[self.slots]

    def _forward(self) -> torch.Tensor:
        out = self.model(input_ids=self.tokens, attention_mask=self.mask, position_ids=self.pos,
                         past_key_values=self.cache, cache_position=self.write_at, use_cache=True)
        return out.logits[:, -1]  # type: ignore[no-any-return]

    def _capture(self) -> None:
        """Record this step's kernels as a graph and replay it; eagerly for good if the capture fails."""
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                logits = self._forward()
        except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
            print(f"rlvr: decoding eagerly: the CUDA graph capture of the decode step failed ({first_line(e)})",
                  file=sys.stderr)
            self.graphs = False
            torch.cuda.synchronize()
            self.logits = self._forward()
            return
        self.graph, self.logits = graph, logits
        graph.replay()
