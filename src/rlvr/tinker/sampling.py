"""A Tinker sampling client's weights, sampled by rlvr's own engine: a copy of a training client's model as it was
saved (or a base model), drawing each sample from its own seed, with the log-probs of the distribution it drew
from (the trainer's forward gives the same, within rlvr's measured bound).

    asample {prompt, num_samples, sampling_params} ─Snapshot.request─▶ Jobs ─(one decoding for every request
    waiting: rlvr.tinker.service)─▶ Snapshot.answer: sequences (tokens, log-probs, stop), the prompt's log-probs
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rlvr.rollout import SamplingParams
from rlvr.samplers.local import CopySampler
from rlvr.samplers.protocol import Job, Sampled
from rlvr.seeds import ids_hash, seed_of
from rlvr.tinker.training import target_logprobs
from rlvr.tinker.wire import WireError, prompt_tokens, sample_response

Sequence = tuple[list[int], list[float], bool]  # (tokens, their log-probs, ended by a stop)


@dataclass(frozen=True)
class Request:
    """One asample request: its draws (a Job each), under `params`, cut at `stop`; `prompt`: the prompt, when
    its log-probs are asked for."""

    jobs: list[Job]
    params: SamplingParams
    stop: Any
    prompt: list[int] | None


class Snapshot:
    """What one sampling client samples with: `sampler()` (rlvr's sampler holding its weights) of `base`, saved at
    `model_path` (None: the base model itself, or a training client's weights when it was made)."""

    def __init__(self, sampler: Callable[[], CopySampler], base: str, model_path: str | None) -> None:
        self._sampler, self.base, self.model_path = sampler, base, model_path

    @property
    def sampler(self) -> CopySampler:
        return self._sampler()

    def request(self, body: dict[str, Any]) -> Request:
        """An asample request's draws, checked: a request without a seed of its own draws from one its sampling
        client's call number (`seq_id`) and its prompt fix, whatever order requests arrive in."""
        tokens = prompt_tokens(body.get("prompt"))
        if not tokens:
            raise WireError("an empty prompt: give at least one token")
        settings = body.get("sampling_params") or {}
        n, budget = int(body.get("num_samples", 1)), settings.get("max_tokens")
        budget = 16 if budget is None else int(budget)
        if n < 1 or budget < 1:
            raise WireError(f"num_samples={n} and sampling_params.max_tokens={budget} must be at least 1")
        seed = settings.get("seed")
        if seed is None:
            seed = seed_of(int(body.get("seq_id") or 0), ids_hash(tokens))
        temperature = settings.get("temperature", 1.0)
        if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not temperature >= 0:
            raise WireError(f"sampling_params.temperature={temperature!r}: give a number, 0 or more")
        top_k = int(settings.get("top_k", -1))
        params = SamplingParams(budget, float(settings.get("temperature", 1.0)), float(settings.get("top_p", 1.0)),
                                0 if top_k < 0 else top_k)
        jobs = [Job(tokens, seed_of(int(seed), i), budget) for i in range(n)]
        return Request(jobs, params, settings.get("stop"), tokens if body.get("prompt_logprobs") else None)

    def answer(self, request: Request, drawn: list[Sampled]) -> bytes:
        """The SampleResponse of `request`, its draws `drawn`."""
        sequences = [at_stop(s, request.stop, self.sampler.tokenizer) for s in drawn]
        logprobs = None if request.prompt is None else self.prompt_logprobs(request.prompt)
        return sample_response(sequences, logprobs)

    def prompt_logprobs(self, tokens: list[int]) -> list[float]:
        """log π(tokens[i] | tokens[:i]) for i ≥ 1."""
        if len(tokens) < 2:
            return []
        with torch.no_grad():
            return target_logprobs(self.sampler.model, [tokens[:-1]], [tokens[1:]])[0].tolist()


def at_stop(sampled: Sampled, stop: Any, tokenizer: Any) -> Sequence:
    """A draw cut after its first stop (token ids, or strings its text reaches), the stop included; the model's own
    stop token ends every draw. Each token depends on its seed alone, so this is what stopping there would draw."""
    ids, logprobs, stopped = list(sampled.token_ids), list(sampled.logprobs), sampled.stopped
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if not stops:
        return ids, logprobs, stopped
    if all(isinstance(s, int) for s in stops):
        end = next((k + 1 for k, t in enumerate(ids) if t in stops), None)
    elif all(isinstance(s, str) for s in stops):
        end = next((k + 1 for k in range(len(ids)) if any(s in tokenizer.decode(ids[:k + 1]) for s in stops)),
                   None)
    else:
        raise WireError(f"sampling_params.stop {stops!r}: give token ids or strings, not both")
    return (ids[:end], logprobs[:end], True) if end is not None else (ids, logprobs, stopped)
