"""The run's sampler on this rank (rlvr.samplers.build): with several ranks and a vLLM server, one server that
rank 0 starts and feeds with the weights, its address shared with the other ranks, which sample from it too;
colocated, an engine in each rank's process (vLLM's `external_launcher`: it joins the ranks' process group)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from rlvr.config import EnvironmentConfig, GenerationConfig
from rlvr.data.lengths import context_length
from rlvr.harness.sampler import HarnessSampler
from rlvr.run.world import World, barrier, gather_across
from rlvr.samplers import Sampler
from rlvr.samplers.build import build_sampler, give_weights


def rank_sampler(generation: GenerationConfig, world: World, **kwargs: Any) -> Sampler:
    """build_sampler's sampler for this rank of `world` (kwargs: build_sampler's); where the environment names an
    agent (an agent function, a verifiers environment: rlvr.harness), the sampler that runs it over that one."""
    environment: EnvironmentConfig | None = kwargs.get("environment")
    agent = agent_of(environment)
    if environment is None or agent is None:
        return _rank_sampler(generation, world, **kwargs)
    inner = _rank_sampler(generation, world, **{**kwargs, "environment": None, "make_env": None})
    return HarnessSampler(inner, kwargs["tokenizer"], agent, environment, context_length(kwargs["model"]))


def agent_of(environment: EnvironmentConfig | None) -> Any:
    """The agent `environment` names (an agent function, a verifiers environment: rlvr.harness), or None."""
    from rlvr.envs.loading import load_agent

    return load_agent(environment.name, environment.params) if environment is not None and environment.name else None


def _rank_sampler(generation: GenerationConfig, world: World, **kwargs: Any) -> Sampler:
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
