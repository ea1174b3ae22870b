"""Low-rank adapters (LoRA, Hu et al. 2021) through peft: W x + (α / r) · B A x, with W frozen.

Only A and B are trained, so gradients and AdamW's moments exist for a few percent of the weights,
and the reference policy π_ref of the KL term is the same network with the adapters switched off
(`AdaptersOff`): no second copy of the model. A checkpoint's model/ then holds the adapters only
(adapter_config.json names the base they belong to), which `load_adapted` puts back on that base.

peft is imported only when adapters are used (it takes seconds to import).
"""

from __future__ import annotations

import functools
import json
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from rlvr.config import LoraConfig
from rlvr.errors import UserError, first_line

ADAPTER_CONFIG = "adapter_config.json"  # what peft's save_pretrained writes next to the adapter weights


def has_adapters(model: Any) -> bool:
    """Whether `model` is a peft model (without importing peft: a model cannot be one before it is)."""
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def merged(model: Any) -> torch.nn.Module:
    """The plain causal LM under `model`'s adapters, B·A added into its weights (peft's merge_and_unload: the
    adapters are gone from the result), or `model` itself when it has none."""
    return model.merge_and_unload() if has_adapters(model) else model  # type: ignore[no-any-return]


def is_adapter_dir(path: str | Path) -> bool:
    return (Path(path) / ADAPTER_CONFIG).is_file()


def add_adapters(model: torch.nn.Module, lora: LoraConfig, base: str, task: str = "CAUSAL_LM") -> torch.nn.Module:
    """`model` with new adapters (B = 0: the same function as before) and its own weights frozen; `base` is
    recorded as where the base model loads from, so the saved adapters can be put back on it. `task`:
    peft's task type; SEQ_CLS (a reward model) trains and saves the new score head whole, with the adapters."""
    import peft

    targets = "all-linear" if lora.target_modules == ["all-linear"] else list(lora.target_modules)
    config = peft.LoraConfig(r=lora.rank, lora_alpha=lora.alpha,  # type: ignore[arg-type]  # (peft says int; a float works)
                             lora_dropout=lora.dropout, target_modules=targets, task_type=task)
    try:
        with quiet_peft():
            adapted = peft.get_peft_model(model, config)
    except ValueError as e:  # target modules the model does not have
        raise UserError(f"model.lora.target_modules={lora.target_modules}: {first_line(e)} (use all-linear, or "
                        "names of the model's linear layers such as q_proj, v_proj)") from None
    adapted.peft_config["default"].base_model_name_or_path = base  # (peft sets the model's own name, often none)
    return adapted


def load_adapted(folder: Path, load_base: Callable[[str], tuple[torch.nn.Module, Any]], *,
                 trainable: bool) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) from adapters saved in `folder` on the base their config names (loaded by
    `load_base`): trainable adapters (resuming) or, for sampling and evaluation, merged into the weights."""
    import peft

    base_name = json.loads((folder / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    if not base_name:
        raise UserError(f"{folder / ADAPTER_CONFIG} names no base model (base_model_name_or_path): add it, "
                        "or load the base and the adapters with peft yourself")
    base, tokenizer = load_base(base_name)
    with quiet_peft():
        adapted = peft.PeftModel.from_pretrained(base, str(folder), is_trainable=trainable)
    return (adapted, tokenizer) if trainable else (adapted.merge_and_unload(), tokenizer)


@contextmanager
def quiet_peft() -> Iterator[None]:
    """Without the deprecation notice peft 0.21 triggers in transformers 5 (`is_gradient_checkpointing`)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def decoder(model: torch.nn.Module) -> torch.nn.Module:
    """The decoder stack of a causal LM (its `base_model_prefix` attribute), of the wrapped model for a peft
    model (on which that attribute is the whole causal LM)."""
    inner: Any = model.get_base_model() if has_adapters(model) else model  # type: ignore[operator]
    return getattr(inner, inner.base_model_prefix)  # type: ignore[no-any-return]


def folded_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) of every weight of `model` as the plain causal LM under its adapters names them, each
    adapted weight W + (α / r) · B A, one at a time (never a copy of them all; the model is not written).
    The tensors are the model's own kind: a sharded model's are shards (DTensors), its sums computed on them."""
    inner: Any = model.get_base_model() if has_adapters(model) else model  # type: ignore[operator]
    adapted: dict[str, Any] = {}
    if has_adapters(model):
        from peft.tuners.lora import LoraLayer

        adapted = {f"{name}.base_layer.weight": layer for name, layer in inner.named_modules()
                   if isinstance(layer, LoraLayer) and layer.active_adapters}
    with torch.no_grad():
        for name, tensor in inner.state_dict().items():
            if "lora_" in name:
                continue
            layer = adapted.get(name)
            if layer is not None:  # (as folded_for_decoding folds them: the same bits)
                tensor = _fold(tensor, layer, tensor.dtype)
            yield name.replace(".base_layer.", "."), tensor


def _delta(layer: Any) -> torch.Tensor:
    """(α / r) · B A of a peft LoRA layer, summed over its active adapters, in the weights' own precision even
    inside an autocast block (decoding folds them there): else B A would be rounded to bf16 on a GPU, and a
    sampler given `folded_weights` would decode with other weights than the policy does."""
    device = layer.get_base_layer().weight.device.type
    with torch.autocast(device_type=device, enabled=False):
        return sum(layer.get_delta_weight(name) for name in layer.active_adapters)  # type: ignore[no-any-return]


@contextmanager
def folded_for_decoding(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """For sampling from a LoRA policy: each adapted weight replaced, for the block, by a new tensor
    W + (α / r) · B A, and the adapters switched off, so that each decoded token runs one matmul per layer
    instead of three. The base tensors themselves are never written: they are put back as they were when
    the block ends, bit for bit (peft's merge_adapter / unmerge_adapter would add and subtract B A in place,
    and W + BA − BA is not W in floating point). The price is one copy of the adapted weights while
    decoding (bench/lora_sampling.py measures both), which decoding from packed copies of them sets aside
    (`set_fold_aside`). Inside an autocast block the copy is held in autocast's dtype: the sum rounded once, as
    autocast would round it at every call (the same bits, half the memory in bf16). Any other model is yielded as
    it is."""
    if not has_adapters(model):
        yield model
        return
    from peft.tuners.lora import LoraLayer

    mine: list[int] = []  # this block's entries in _folds
    give_back_freed_memory()  # what the update freed, before the copies are made
    try:
        with torch.no_grad():
            for layer in model.modules():
                if isinstance(layer, LoraLayer) and layer.active_adapters:
                    weight: Any = layer.get_base_layer().weight  # (a Linear's)
                    own = weight.data
                    weight.data = _fold(own, layer)
                    _folds[id(weight)] = (weight, own, layer, weight.dtype)
                    mine.append(id(weight))
        with model.disable_adapter():  # type: ignore[operator]
            yield model
    finally:
        for key in mine:
            weight, own, _, _ = _folds.pop(key)
            weight.data = own
        give_back_freed_memory()


# while folded for decoding, a weight's id -> (the weight, its own tensor, its LoRA layer, the fold's dtype)
_folds: dict[int, tuple[Any, torch.Tensor, Any, torch.dtype]] = {}


def _fold(own: torch.Tensor, layer: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
    """W + (α / r) · B A, a new tensor (`own` is W), in `dtype`: by default autocast's inside an autocast block (on
    W's device), else W's."""
    device = own.device.type
    if dtype is None:
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else own.dtype
    with torch.no_grad():
        return (own + _delta(layer)).to(dtype)


def set_fold_aside(weight: torch.Tensor) -> Callable[[], None] | None:
    """For a weight that `folded_for_decoding` folded (else None): it holds its own tensor again from now on, the
    folded copy freed, for a decoding that computes from a packed copy of the folded weight (rlvr.prepacked); the
    function returned folds it again, to the same bits (the same sum of the same tensors), for what follows."""
    entry = _folds.get(id(weight))
    if entry is None or weight.data is entry[1]:
        return None
    _, own, layer, dtype = entry
    weight.data = own

    def fold_again() -> None:  # (in the first fold's dtype: packed decoding switches autocast off)
        weight.data = _fold(own, layer, dtype)

    return fold_again


def give_back_freed_memory() -> None:
    """Return freed pages to the system (glibc's malloc_trim): the update's activations before the copies
    are made, the copies after, so that the two never add up in the process's memory; elsewhere a no-op."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


@functools.cache
def _libc() -> Any:
    """The C library, looked up once (find_library runs `ldconfig -p` in a subprocess), or None."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def trainable_share(model: torch.nn.Module) -> str:
    """'trainable parameters: 8,192 of 88,704 (9.24%)'.

    >>> layer = torch.nn.Linear(4, 2)
    >>> _ = layer.bias.requires_grad_(False)
    >>> trainable_share(layer)
    'trainable parameters: 8 of 10 (80.00%)'
    """
    params = list(model.parameters())  # (each tied weight once: parameters() skips repeats)
    total = sum(p.numel() for p in params)
    trained = sum(p.numel() for p in params if p.requires_grad)
    return f"trainable parameters: {trained:,} of {total:,} ({100 * trained / max(total, 1):.2f}%)"


class AdaptersOff(torch.nn.Module):
    """The reference policy of a LoRA run: calling it calls `policy_module` (a PolicyModule over the peft
    model, or that module as DDP or FSDP run it) with the adapters of `adapted` switched off, that is the
    frozen base, exactly (peft's `disable_adapter`). It holds no weights of its own."""

    def __init__(self, policy_module: torch.nn.Module, adapted: torch.nn.Module) -> None:
        super().__init__()
        self._parts = (policy_module, adapted)  # a tuple: not registered as submodules, nothing to copy or save

    @property
    def module(self) -> torch.nn.Module:
        return self._parts[0]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        policy_module, adapted = self._parts
        with adapted.disable_adapter():  # type: ignore[operator]
            return policy_module(*args, **kwargs)


def add_unrounded_sums(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """From now on, while its adapters are on, each LoRA layer of `model` adds (α / r) · B A x to its base output
    in fp32 where autocast computed that output in bf16 (or fp16), instead of to its bf16 rounding; nothing when
    the forward passes' `dtype` is fp32. `model` may hold the peft model (a module wrapping it): every module a
    recipe trains has it registered (rlvr.distributed.parallel.Trained: the policy, SFT's model, the reward
    model, the PPO critic).

    peft adds the adapters' term to the base layer's output as that layer returns it: under bf16 autocast, a
    value already rounded to 8 significant bits, and the sum is rounded again. A term under half a unit in the
    last place of the output is then lost whole: always, not on average (the base output lies on bf16's grid, so
    it rounds back to itself). After a few steps at a LoRA learning rate most of the term is that small (B starts
    at 0), so the update's forward computed nearly the base model while the sampler, which decodes from
    W + (α / r) · B A cast to bf16 once (`folded_for_decoding`: rounded once, the term kept on average), sampled
    from the adapted one. Measured on Qwen2.5-Coder-0.5B (configs/chain_sum_qwen.yaml in bf16, its random-reward
    control after 2 steps, the third batch): the trainer's log-probs were 0.013 nats a token from the sampler's
    on average, the fp32 forward's 0.006, this forward's 0.006 (docs/backends.md has the whole run's).

    Handed on in fp32 (the same rounded base output, the term added to it exactly, the layer's later arithmetic
    in fp32), the term is kept. Nothing changes while the adapters are off (the reference pass, folded decoding)
    or in fp32. A hook on each base layer, registered once, that stays through the backward (activation
    checkpointing recomputes the forward there and checks its dtypes) and in deep copies of the model (it names
    its layer, which a deep copy maps to the copy's)."""
    if dtype == torch.float32 or "peft" not in sys.modules:  # (no adapters without peft imported)
        return
    from peft.tuners.lora import LoraLayer

    for layer in model.modules():
        base = layer.get_base_layer() if isinstance(layer, LoraLayer) else None
        if base is not None and not any(isinstance(h, _UnroundedSum) for h in base._forward_hooks.values()):
            base.register_forward_hook(_UnroundedSum(layer))


class _UnroundedSum:
    """The forward hook of `add_unrounded_sums` on `layer`'s base layer."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer

    def __call__(self, module: torch.nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor | None:
        layer = self.layer
        if output.dtype in (torch.bfloat16, torch.float16) and layer.active_adapters and not (
                layer.disable_adapters or layer.merged):
            return output.float()
        return None


def sum_lora_in_place(model: torch.nn.Module) -> None:
    """From now on each LoRA linear layer of `model` forms W x + (α / r) · B A x in place: (α / r) times B A x
    into B A x's own buffer, then that added into the base output's, where peft makes a new tensor for each
    (`result = result + lora_B(lora_A(x)) * scaling`). The same operations on the same values, so the same bits,
    forward and backward (the base output and B A x are kept by no backward: a linear layer's needs its input).

    Two [tokens × out] temporaries fewer per layer and pass: freed as soon as made, but between the tensors the
    forward keeps for the backward they left holes in the heap that later blocks did not fit. One update of
    bench/step_memory.py's SmolLM2-135M job under LoRA (rank 16, fp32) peaked at 6.8 GB in 3 runs of 5 before (5.3
    in the others: the address layout decides), 5.8 GB in all 5 after (docs/lora.md).
    Anything else peft's layer does (a variant such as DoRA, mixed adapters in a batch, merged or disabled
    adapters) is left to peft. Kept by deep copies (a bound method of the layer, copied with it); set once."""
    if "peft" not in sys.modules:  # (no adapters without peft imported)
        return
    from peft.tuners.lora import Linear

    if not hasattr(Linear, "_cast_input_dtype"):  # (an older peft: its own forward, left as it is)
        return
    for layer in model.modules():
        if type(layer) is Linear and "forward" not in vars(layer):  # (not a subclass: its forward is its own)
            layer.forward = types.MethodType(_forward_summing_in_place, layer)  # type: ignore[method-assign]


def _forward_summing_in_place(self: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """peft's LoRA Linear.forward, the sum formed in place (`sum_lora_in_place`)."""
    if args or kwargs or self.disable_adapters or self.merged or getattr(self, "lora_variant", None):
        return type(self).forward(self, x, *args, **kwargs)  # type: ignore[no-any-return]
    result: torch.Tensor = self.base_layer(x)
    for name in self.active_adapters:
        if name in self.lora_A:
            x = self._cast_input_dtype(x, self.lora_A[name].weight.dtype)
            term = self.lora_B[name](self.lora_A[name](self.lora_dropout[name](x)))
            result = result.add_(term.mul_(self.scaling[name]))
    return result
