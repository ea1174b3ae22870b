"""The run's sampler on this rank (rlvr.samplers.build): with several ranks and a vLLM server, one server that
rank 0 starts and feeds with the weights, its address shared with the other ranks, which sample from it too;
colocated, an engine in each rank's process (vLLM's `external_launcher`: it joins the ranks' process group)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from rlvr.config import GenerationConfig
from rlvr.distributed.world import World, barrier, gather_across
from rlvr.samplers import Sampler
from rlvr.samplers.build import build_sampler, give_weights


def rank_sampler(generation: GenerationConfig, world: World, **kwargs: Any) -> Sampler:
    """build_sampler's engine for this rank of `world` (kwargs: build_sampler's). An agent that runs its own loop
    (rlvr.harness) or an environment it converses with (rlvr.envs.driven) runs over it: the caller wraps it
    (rlvr.harness.sampler.over_episodes); the run core knows no agents."""
    if generation.backend != "vllm" or generation.vllm.mode != "server" or world.size == 1:
        return build_sampler(generation, ranks=world.size, **kwargs)
    sampler = build_sampler(generation, ranks=world.size, **kwargs) if world.is_main else None
    url = gather_across(getattr(getattr(sampler, "engine", None), "url", None), world)[0]  # (rank 0's server)
    if sampler is None:
        shared = dataclasses.replace(generation, vllm=dataclasses.replace(generation.vllm, url=url))
        sampler = build_sampler(shared, ranks=world.size, pushes=False, **kwargs)
    return sampler


def push_weights(sampler: Sampler, weights: Callable[[], Iterator[tuple[str, torch.Tensor]]], version: int,
                 world: World) -> None:
    """give_weights on every rank: rank 0's push is done before any rank checks what the sampler holds."""
    give_weights(sampler, weights, version, loaded=lambda: barrier(world))
