"""What VLLMSampler asks of a vLLM engine, in this process (rlvr.samplers.vllm.Colocated) or behind a server
(rlvr.samplers.vllm_server.Server): whole completions of token ids, one seed each, and weights in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from rlvr.rollout import SamplingParams
from rlvr.samplers.protocol import Job, Sampled

WORKER = "rlvr.samplers.vllm_worker.WeightsReceiver"  # the engine's worker extension (vllm_worker.py)


class Engine(Protocol):
    """What VLLMSampler needs of a vLLM engine, in this process or behind a server. `generate` calls
    `on_done(i, completion)` on the calling thread as each job ends (a server: in the order they end; the
    in-process engine: all at the end)."""

    def generate(self, jobs: Sequence[Job], params: SamplingParams, stop_ids: list[int],
                 on_done: Callable[[int, Sampled], None] | None = None) -> list[Sampled]: ...
    def load(self, named_tensors: list[tuple[str, torch.Tensor]], version: int) -> None: ...
    def loaded(self) -> tuple[int, str]: ...
    def close(self) -> None: ...


def vllm_seed(seed: int) -> int:
    """A completion's seed (rlvr.seeds, 64 bits) as vLLM takes it (a non-negative int64)."""
    return seed % 2**63


def sampling_params(params: SamplingParams, job: Job, stop_ids: list[int]) -> dict[str, Any]:
    """vLLM SamplingParams' fields for one completion: greedy at temperature 0; top_k 0 = off (vLLM: -1)."""
    return {"n": 1, "temperature": params.temperature, "top_p": params.top_p,
            "top_k": params.top_k if params.top_k > 0 else -1, "max_tokens": job.max_tokens,
            "seed": vllm_seed(job.seed), "logprobs": 0, "stop_token_ids": list(stop_ids), "ignore_eos": False,
            "skip_special_tokens": False, "detokenize": False}


def whole_prefill_tokens(folder: Path) -> int:
    """vLLM's batch token budget on a CPU, where a prompt's prefill is never split (vLLM 0.32's CPU build fails
    on a seeded request whose partial prefill it discards: "CPU Generator does not use offset"): the longest
    sequence of the model whose config is in `folder`, at least 8192."""
    from transformers import AutoConfig

    try:
        longest = getattr(AutoConfig.from_pretrained(folder), "max_position_embeddings", None)
    except (OSError, ValueError):  # (no config there: the server at a url has its own)
        longest = None
    return max(8192, int(longest or 8192))
