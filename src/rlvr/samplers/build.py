"""The run's sampler, as generation.backend says: rlvr's own engine (`local`) or vLLM (`vllm`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from rlvr.config import GenerationConfig
from rlvr.errors import UserError
from rlvr.samplers.local import Decoding, LocalSampler
from rlvr.samplers.protocol import Sampler, weights_fingerprint


def build_sampler(generation: GenerationConfig, *, model: torch.nn.Module, decoding: Decoding,
                  weights: Callable[[], Iterator[tuple[str, torch.Tensor]]], tokenizer: Any, device: torch.device,
                  dtype: torch.dtype, add_special_tokens: bool, seed: int = 0, ranks: int = 1,
                  pushes: bool = True) -> Sampler:
    """`model` is the plain causal LM (its config describes the network to vLLM), `decoding` lends it whole
    to rlvr's own engine, `weights` hands out its full weights (a sampler with a copy loads them); `ranks`:
    how many processes sample (each its own share of the prompts: with vLLM colocated, each from an engine in
    its process; as a server, from one server, which only the process that `pushes` gives the weights;
    rlvr.run.samplers starts it on rank 0 and shares its address)."""
    if generation.backend == "local":
        return LocalSampler(decoding, tokenizer, add_special_tokens=add_special_tokens, weights=weights,
                            cuda_graphs=generation.cuda_graphs)
    from rlvr.rollout import stop_token_ids
    from rlvr.samplers.scratch import scratch_dir
    from rlvr.samplers.vllm import Colocated, VLLMSampler, model_folder

    settings = generation.vllm
    folder = model_folder(model, scratch_dir("rlvr-vllm-"))  # (the network's config.json)
    if settings.mode == "server":
        from rlvr.samplers.vllm_server import Server

        engine: Any = Server(folder, settings, device, dtype, seed, remove_folder=True, pushes=pushes)
    else:
        engine = Colocated(folder, settings, device, dtype, seed, remove_folder=True)
    return VLLMSampler(engine, tokenizer, stop_ids=stop_token_ids(model, tokenizer),
                       add_special_tokens=add_special_tokens, timeout_s=settings.timeout_s)


def give_weights(sampler: Sampler, weights: Callable[[], Iterator[tuple[str, torch.Tensor]]], version: int,
                 loaded: Callable[[], None] = lambda: None) -> None:
    """`sampler` gets the weights, tagged with `version` (the policy's step). A sampler with a copy of its own
    must then hold exactly them (its fingerprint, bit for bit), or this stops before it samples with others.
    `loaded` runs between the two (with several ranks: a barrier, so that no rank checks before rank 0 pushed)."""
    if not sampler.holds_copy:  # (it samples with the policy's own tensors: only the version to record)
        sampler.load_weights(weights(), version=version)
        loaded()
        return
    named = list(weights())  # (read once: under FSDP every read gathers, with LoRA every read folds)
    sampler.load_weights(named, version=version)
    loaded()
    held, expected = sampler.fingerprint(), weights_fingerprint(named)
    if held != expected:
        raise UserError(f"the sampler holds other weights than the policy's after the push of step {version} "
                        f"(fingerprint {held}, the policy's {expected}): the weight transfer lost or changed some; "
                        "the last checkpoint is kept")
