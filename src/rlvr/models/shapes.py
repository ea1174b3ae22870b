"""A model's shapes before its weights load: what a memory plan (rlvr.rl.memory) is computed from.

The model is built on PyTorch's meta device from its config (no memory, no weights read), so the
parameter count is the model's own, tied embeddings counted once, and the linear layers are listed for
counting LoRA's adapters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class Shapes:
    parameters: int  # every weight, tied ones once
    hidden: int
    intermediate: int  # the MLP's inner width
    layers: int
    kv_width: int  # key (= value) width of a layer: key-value heads × head size
    vocab: int
    context: int  # the longest sequence it was made for
    linears: tuple[tuple[str, int, int], ...]  # (name, in, out) of each linear layer but the output layer

    def adapter_parameters(self, rank: int, targets: list[str]) -> int:
        """LoRA's trainable parameters at `rank` on `targets` (`all-linear`, or layer names as peft matches
        them: the last part of a module's name).

        >>> Shapes(0, 4, 8, 1, 4, 10, 16, (("layers.0.q_proj", 4, 4), ("layers.0.up_proj", 4, 8))).adapter_parameters(
        ...     2, ["q_proj"])
        16
        """
        return sum(rank * (n_in + n_out) for _, n_in, n_out in self.targeted(targets))

    def targeted(self, targets: list[str]) -> list[tuple[str, int, int]]:
        """The linear layers LoRA adapts on `targets` (`all-linear`, or the last part of a module's name)."""
        every = targets == ["all-linear"]
        return [linear for linear in self.linears if every or linear[0].rsplit(".", 1)[-1] in targets]


def shapes_of(config: Any) -> Shapes:
    """The Shapes of a causal LM with transformers config `config` (built on the meta device).

    >>> from rlvr.models.loading import build_tiny_tokenizer, tiny_config
    >>> s = shapes_of(tiny_config(build_tiny_tokenizer()))
    >>> s.hidden, s.layers, s.kv_width, s.parameters
    (64, 2, 32, 80512)
    """
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    output = model.get_output_embeddings()
    linears = tuple((name, m.in_features, m.out_features) for name, m in model.named_modules()
                    if isinstance(m, torch.nn.Linear) and m is not output)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return Shapes(
        parameters=sum(p.numel() for p in model.parameters()),
        hidden=text.hidden_size, intermediate=getattr(text, "intermediate_size", 4 * text.hidden_size),
        layers=text.num_hidden_layers, kv_width=(getattr(text, "num_key_value_heads", None) or heads) * head_dim,
        vocab=text.vocab_size, context=getattr(text, "max_position_embeddings", 0) or 0, linears=linears)


def model_shapes(name: str, cache_dir: str) -> Shapes | None:
    """The Shapes of the model `name` loads (rlvr.models.loading.load_model's names), from its config alone;
    None when its config cannot be read without loading it (a hub id not in the local cache, adapters on an
    unknown base, an architecture transformers builds only from weights)."""
    from transformers import AutoConfig

    from rlvr.models.adapters import ADAPTER_CONFIG
    from rlvr.models.loading import TINY_MODELS, build_tiny_tokenizer, resolve_model_path, tiny_config

    try:
        if name in TINY_MODELS:
            return shapes_of(tiny_config(build_tiny_tokenizer(), TINY_MODELS[name]))
        path = resolve_model_path(name, cache_dir)
        folder = Path(path)
        if (folder / ADAPTER_CONFIG).is_file():
            base = json.loads((folder / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
            return model_shapes(base, cache_dir) if base else None
        if not (folder / "config.json").is_file():
            return shapes_of(AutoConfig.from_pretrained(path, local_files_only=True))
        return shapes_of(AutoConfig.from_pretrained(path))
    except Exception:  # (the load itself then says what is wrong, in its own words)
        return None
