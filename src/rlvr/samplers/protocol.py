"""What a sampler is asked, and what it promises (rlvr.samplers)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from rlvr.records import Example, Rollout
from rlvr.rollout import SamplingParams

Message = dict[str, str]
# (group index p in the request list, its G completion texts, their token ids): a group the moment it is done
GroupDone = Callable[[int, list[str], list[list[int]]], None]


@dataclass(frozen=True)
class Prompt:
    """One dataset row as it is asked: the row, its rendered prompt text and, with the chat template, its chat
    turns (what a conversation with an environment starts from)."""

    example: Example
    text: str
    messages: list[Message] | None = None


@dataclass(frozen=True)
class SampleRequest:
    """Completions of one prompt: one per seed (rlvr.seeds), each drawn from its own seed alone."""

    prompt: Prompt
    seeds: tuple[int, ...]


@dataclass(frozen=True)
class Job:
    """One completion to sample, as token ids: the tokens it continues, its seed, and its token budget."""

    ids: list[int]
    seed: int
    max_tokens: int


@dataclass(frozen=True)
class Sampled:
    """One completion as a sampler returns it for a Job."""

    token_ids: list[int]
    logprobs: list[float]  # each token's, under the distribution it was drawn from
    stopped: bool  # ended by a stop token (else by the token budget)
    # where top-k / top-p cut each token's temperature-scaled logits (rlvr.rollout); None: nothing cut, or the
    # engine does not say (vLLM: algorithm.rollout_correction covers the difference)
    floors: list[float] | None = None


class Sampler(Protocol):
    """Samples completions with the weights it was last given.

    - `sample(requests, params, on_group_done)`: every request with the same number of seeds G; the Rollout
      holds the requests' groups in order (rows p·G … p·G + G − 1), each sampled token's log-prob under the
      distribution it was drawn from, and the support floors where top-k / top-p cut it (rlvr.rollout);
      `on_group_done(p, texts, ids)` may hear of each group as soon as it is complete.
    - `complete(jobs, params)`: token ids in, token ids out: each Job's completion drawn from its seed alone,
      whatever else the call holds (what a client of an OpenAI-compatible endpoint is served), equal to what
      `sample` draws for the same prompt ids and seed.
    - `load_weights(named_tensors, version)`: the policy's weights as a plain causal LM names them (adapters
      folded: rlvr.run.policy.Policy.named_weights), tagged with the policy's version (its step).
    - `fingerprint()`: a hash of the weights it samples with, equal to the policy's `weights_fingerprint` of
      the same weights.
    - `close()`: free what it holds (threads, processes, memory).
    """

    version: int  # the policy version (step) of the weights it was last given
    holds_copy: bool  # it samples with a copy of the weights (checked against the policy's fingerprint)

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams,
               on_group_done: GroupDone | None = None) -> Rollout: ...
    def complete(self, jobs: Sequence[Job], params: SamplingParams) -> list[Sampled]: ...
    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> None: ...
    def fingerprint(self) -> str: ...
    def close(self) -> None: ...


def group_size(requests: Sequence[SampleRequest]) -> int:
    """G, the number of seeds every request of one `sample` call carries (the same for all, or ValueError)."""
    size = len(requests[0].seeds)
    if any(len(r.seeds) != size for r in requests):
        raise ValueError("every request of one call asks for the same number of completions")
    return size


class Wrapper:
    """A Sampler over another (`inner`, an engine or another wrapper): its weights, their version, `complete`
    and closing are the inner one's; a subclass says what `sample` makes of it (an agent's runs:
    rlvr.harness.sampler; conversations with an environment: rlvr.envs.driven)."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # engine, interrupt, ...: the inner sampler's
        return getattr(self.__dict__["inner"], name)

    @property
    def version(self) -> int:
        return self.inner.version

    @version.setter
    def version(self, value: int) -> None:
        self.inner.version = value

    @property
    def holds_copy(self) -> bool:
        return self.inner.holds_copy

    @holds_copy.setter
    def holds_copy(self, value: bool) -> None:
        self.inner.holds_copy = value

    def complete(self, jobs: Sequence[Job], params: SamplingParams) -> list[Sampled]:
        return self.inner.complete(jobs, params)

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> None:
        self.inner.load_weights(named_tensors, version)

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def close(self) -> None:
        self.inner.close()


def weights_fingerprint(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> str:
    """A short hash of named tensors, in name order, bit for bit (dtype and shape included).

    >>> a = weights_fingerprint([("w", torch.ones(2)), ("b", torch.zeros(1))])
    >>> a == weights_fingerprint([("b", torch.zeros(1)), ("w", torch.ones(2))]), len(a)
    (True, 16)
    >>> a == weights_fingerprint([("w", torch.ones(2) * (1 + 2**-23)), ("b", torch.zeros(1))])
    False
    """
    digest = hashlib.blake2b(digest_size=8)
    for name, tensor in sorted(named_tensors, key=lambda item: item[0]):
        t = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy())  # type: ignore[arg-type]  # (numpy: __buffer__ from 3.12)
    return digest.hexdigest()
