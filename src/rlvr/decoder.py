"""A compact decoder for Llama-family models: the rollout engine's inner loop.

HF's forward is general; decoding one token for a batch on a CPU is bound by memory traffic, and
three things there cost more than the arithmetic:

- the KV cache grows by concatenation, copying every layer's cache at every token;
- each of the G completions of a group carries its own copy of the prompt's keys and values,
  and attention reads all G copies at every token;
- every weight is read at every token (that one stays: it is the floor of batched decoding).

This decoder reads the model's own parameters (so it always decodes with the current policy) and
keeps two caches per layer: the prompts' keys and values once per prompt, [P, Hkv, Lp, D], and the
completions' in a buffer that grows by doubling, [B, Hkv, capacity, D], written in place. Attention
for a decoding token is computed against its prompt's cache (all rows of a group in one matrix
product, so the prompt is read once per group) and against its own completion cache, under one
softmax.

The prompts' prefill runs here too (causal attention over the left-padded prompts in one pass),
so the prompt cache is born in this layout. The arithmetic is HF's (same RMSNorm, rotary and
attention formulas); greedy decoding gives HF `generate`'s tokens (tested).

Supported: `LlamaForCausalLM`, `MistralForCausalLM`, `Qwen2ForCausalLM` (bias on q/k/v), any
rotary scaling the model's own rotary module implements. `fast_decoder` returns None otherwise and
the engine falls back to HF's forward.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that ignore left padding: [B, L] bool -> [B, L] long."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


SUPPORTED = {"llama", "mistral", "qwen2"}


def fast_decoder(model: torch.nn.Module) -> LlamaDecoder | None:
    """A decoder over `model`'s parameters, or None when the architecture or setup is not supported."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "model_type", None) not in SUPPORTED:
        return None
    if getattr(config, "hidden_act", "silu") != "silu":
        return None
    if getattr(config, "use_sliding_window", False) or (config.model_type == "mistral" and getattr(config, "sliding_window", None)):
        return None
    if getattr(config, "mlp_bias", False) or getattr(config, "pretraining_tp", 1) != 1:
        return None
    return LlamaDecoder(model)


class _Linear:
    """y = x·Wᵀ + b on the live parameters; several weights side by side act as one wider layer."""

    def __init__(self, weights: list[torch.Tensor], biases: list[torch.Tensor | None]) -> None:
        self.weights, self.biases = weights, biases

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        outs = [F.linear(x, w, b) for w, b in zip(self.weights, self.biases)]
        return outs[0] if len(outs) == 1 else torch.cat(outs, -1)


class LlamaDecoder:
    """Token-at-a-time decoding over a shared prompt cache; see the module docstring."""

    def __init__(self, model: torch.nn.Module) -> None:
        backbone = getattr(model, model.base_model_prefix)
        config = model.config
        self.heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.scale = self.head_dim**-0.5
        self.embed, self.rotary, self.final_norm = backbone.embed_tokens, backbone.rotary_emb, backbone.norm
        self.layers = []
        for layer in backbone.layers:
            att, mlp = layer.self_attn, layer.mlp
            self.layers.append({
                "norm1": layer.input_layernorm, "norm2": layer.post_attention_layernorm,
                "qkv": _Linear([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight], [att.q_proj.bias, att.k_proj.bias, att.v_proj.bias]),
                "o": _Linear([att.o_proj.weight], [att.o_proj.bias]),
                "gate_up": _Linear([mlp.gate_proj.weight, mlp.up_proj.weight], [None, None]),
                "down": _Linear([mlp.down_proj.weight], [None]),
            })
        head = model.get_output_embeddings()
        self.lm_head = _Linear([head.weight], [getattr(head, "bias", None)])

    @torch.no_grad()
    def prefill(self, ids: torch.Tensor, mask: torch.Tensor, group_size: int) -> tuple[DecodeState, torch.Tensor]:
        """Run the P left-padded prompts [P, Lp] once: (the decoding state of their P·G rows, next-token logits [P, V])."""
        p, length = ids.shape
        x = self.embed(ids)
        cos, sin = self.rotary(x, positions(mask))  # [P, Lp, D]
        cos, sin = cos[:, None], sin[:, None]
        causal = torch.ones(length, length, dtype=torch.bool, device=ids.device).tril()
        # a padding query attends to itself only, so no softmax row is empty
        allowed = (causal & mask[:, None, None, :]) | torch.eye(length, dtype=torch.bool, device=ids.device)
        prompt_kv = []
        for layer in self.layers:
            q, k, v = self._qkv(layer, x, cos, sin, (p, length))
            prompt_kv.append((k.contiguous(), v.contiguous()))
            attn = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=self.scale, enable_gqa=self.kv_heads != self.heads)
            x = self._finish_layer(layer, x, attn.transpose(1, 2).reshape(p, length, -1))
        logits = self.lm_head(self.final_norm(x[:, -1]))
        return self._start(prompt_kv, mask, group_size), logits

    def _qkv(self, layer, x, cos, sin, lead: tuple[int, ...]):
        """x [B, H] -> q [B, heads, D], k and v [B, kv_heads, D]; x [P, L, H] -> [P, heads, L, D] ... (q and k rotated)."""
        q_size, kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
        q, k, v = layer["qkv"](layer["norm1"](x).reshape(-1, x.shape[-1])).split([q_size, kv_size, kv_size], dim=-1)
        shape = (*lead, -1, self.head_dim)
        q, k, v = q.reshape(shape), k.reshape(shape), v.reshape(shape)
        if len(lead) == 2:  # [P, L, heads, D] -> [P, heads, L, D]
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        return _rotate(q, cos, sin), _rotate(k, cos, sin), v

    def _finish_layer(self, layer, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Output projection, residual, MLP, residual."""
        shape = x.shape
        x = x + layer["o"](attn.reshape(-1, attn.shape[-1])).view(shape)
        gate, up = layer["gate_up"](layer["norm2"](x).reshape(-1, shape[-1])).chunk(2, dim=-1)
        return x + layer["down"](F.silu(gate) * up).view(shape)

    def _start(self, prompt_kv: list[tuple[torch.Tensor, torch.Tensor]], prompt_mask: torch.Tensor, group_size: int, capacity: int = 64) -> DecodeState:
        p = prompt_mask.shape[0]
        n = p * group_size
        rows = torch.arange(n, device=prompt_mask.device)
        bias = torch.zeros(prompt_mask.shape, dtype=prompt_kv[0][0].dtype, device=prompt_mask.device).masked_fill(~prompt_mask, float("-inf"))
        cache = [
            (k.new_empty((n, self.kv_heads, capacity, self.head_dim)), v.new_empty((n, self.kv_heads, capacity, self.head_dim)))
            for k, v in prompt_kv
        ]
        return DecodeState(prompt_kv, bias[:, None, None, :], group_size, rows // group_size, rows % group_size, cache, 0)

    @torch.no_grad()
    def step(self, state: DecodeState, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Feed one token per active row at `positions`; returns next-token logits [B, V]."""
        state.make_room()
        b = tokens.shape[0]
        x = self.embed(tokens)  # [B, H]
        cos, sin = self.rotary(x[:, None, :], positions[:, None])  # [B, 1, D], broadcasting over heads
        for layer, (kc, vc), (kp, vp) in zip(self.layers, state.cache, state.prompt_kv):
            q, k, v = self._qkv(layer, x, cos, sin, (b,))
            kc[:, :, state.length] = k
            vc[:, :, state.length] = v
            attn = self._attend(state, q, kc[:, :, : state.length + 1], vc[:, :, : state.length + 1], kp, vp)
            x = self._finish_layer(layer, x, attn.reshape(b, -1))
        state.length += 1
        return self.lm_head(self.final_norm(x))

    def _attend(self, state: DecodeState, q, kc, vc, kp, vp) -> torch.Tensor:
        """One query per row against [its prompt's keys ; its own completion keys], one softmax."""
        b, rep = q.shape[0], self.heads // self.kv_heads
        p, g = kp.shape[0], state.group_size
        q = q.view(b, self.kv_heads, rep, self.head_dim) * self.scale
        # prompt part: the rows of a group stacked as extra queries of their prompt -> one read of its cache
        grouped = q.new_zeros((p, g, self.kv_heads, rep, self.head_dim))
        grouped[state.row_prompt, state.slot] = q
        grouped = grouped.permute(0, 2, 1, 3, 4).reshape(p, self.kv_heads, g * rep, self.head_dim)
        prompt_scores = (grouped @ kp.transpose(-1, -2) + state.prompt_bias)  # [P, Hkv, G·rep, Lp]
        prompt_scores = prompt_scores.view(p, self.kv_heads, g, rep, -1).permute(0, 2, 1, 3, 4)[state.row_prompt, state.slot]
        own_scores = q @ kc.transpose(-1, -2)  # [B, Hkv, rep, t]
        lp = prompt_scores.shape[-1]
        weights = torch.cat([prompt_scores, own_scores], dim=-1).softmax(-1)
        grouped_w = weights.new_zeros((p, g, self.kv_heads, rep, lp))
        grouped_w[state.row_prompt, state.slot] = weights[..., :lp]
        grouped_w = grouped_w.permute(0, 2, 1, 3, 4).reshape(p, self.kv_heads, g * rep, lp)
        from_prompt = (grouped_w @ vp).view(p, self.kv_heads, g, rep, self.head_dim).permute(0, 2, 1, 3, 4)[state.row_prompt, state.slot]
        return from_prompt + weights[..., lp:] @ vc  # [B, Hkv, rep, D]


class DecodeState:
    """The caches of one decoding batch; rows leave with `keep`."""

    def __init__(self, prompt_kv, prompt_bias, group_size, row_prompt, slot, cache, length) -> None:
        self.prompt_kv, self.prompt_bias, self.group_size = prompt_kv, prompt_bias, group_size
        self.row_prompt, self.slot, self.cache, self.length = row_prompt, slot, cache, length

    def keep(self, rows: torch.Tensor) -> None:
        """Drop every row not in `rows` (indices into the current rows); copies only the filled part."""
        self.row_prompt, self.slot = self.row_prompt[rows], self.slot[rows]
        self.cache = [(_take(k, rows, self.length), _take(v, rows, self.length)) for k, v in self.cache]

    def make_room(self) -> None:
        """Double the completion buffers when full."""
        capacity = self.cache[0][0].shape[2]
        if self.length < capacity:
            return
        grown = []
        for k, v in self.cache:
            k2, v2 = k.new_empty((*k.shape[:2], 2 * capacity, k.shape[3])), v.new_empty((*v.shape[:2], 2 * capacity, v.shape[3]))
            k2[:, :, :capacity], v2[:, :, :capacity] = k, v
            grown.append((k2, v2))
        self.cache = grown


def _take(buffer: torch.Tensor, rows: torch.Tensor, length: int) -> torch.Tensor:
    out = buffer.new_empty((rows.shape[0], *buffer.shape[1:]))
    out[:, :, :length] = buffer[rows, :, :length]
    return out


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding as HF applies it: x·cos + rotate_half(x)·sin."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin
