"""LocalSampler: rlvr's own engine in this process, on the policy's own weights (rlvr.rollout). It knows token
ids only; conversations with an environment are driven over it (rlvr.envs.driven, on the model it lends)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from rlvr.records import Rollout
from rlvr.rollout import SamplingParams, generate, rollout, stop_token_ids
from rlvr.samplers.protocol import GroupDone, Job, Sampled, SampleRequest, group_size, weights_fingerprint

Decoding = Callable[[Callable[[torch.nn.Module], Any]], Any]  # fn -> fn(model), the model whole and in eval mode


class LocalSampler:
    """Samples with the model `decoding` lends it (rlvr.run.policy.Policy.decoding: the policy's own weights,
    gathered or folded as needed; or `lambda fn: fn(model)`), in this process, on that model's device.

    It holds no copy of the weights: they are the policy's, in place, so `load_weights` only records the
    version they are at (the trainer calls it after every update, as it would for a sampler with a copy)
    and `fingerprint` hashes them as the policy hands them out (`weights`). `decoding` is what it lends the
    layer above it (rlvr.envs.driven: conversations decoded with each row's KV cache kept).
    `cuda_graphs`: on a GPU, decode over a static cache with the step a CUDA graph (rlvr.graphed)."""

    def __init__(self, decoding: Decoding, tokenizer: Any, *, add_special_tokens: bool = False,
                 weights: Callable[[], Iterator[tuple[str, torch.Tensor]]] | None = None,
                 cuda_graphs: bool = False) -> None:
        self.decoding, self.tokenizer, self.add_special_tokens = decoding, tokenizer, add_special_tokens
        self.cuda_graphs = cuda_graphs
        self._weights = weights
        self.version = 0
        self.holds_copy = False  # (it samples with the policy's own tensors)

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams,
               on_group_done: GroupDone | None = None) -> Rollout:
        g = group_size(requests)
        examples = [r.prompt.example for r in requests]
        seeds = [s for r in requests for s in r.seeds]
        return self.decoding(lambda model: rollout(  # type: ignore[no-any-return]
            model, self.tokenizer, examples, [r.prompt.text for r in requests], g, params, seeds=seeds,
            add_special_tokens=self.add_special_tokens, on_group_done=on_group_done,
            static=self.cuda_graphs and next(model.parameters()).device.type == "cuda"))

    def complete(self, jobs: Sequence[Job], params: SamplingParams) -> list[Sampled]:
        """Decoded together to the longest budget, each cut to its own: a row's tokens depend on its seed
        alone (rlvr.rollout), so the first n are those a budget of n would give."""
        if not jobs:
            return []
        longest = dataclasses.replace(params, max_new_tokens=max(job.max_tokens for job in jobs))

        def run(model: torch.nn.Module) -> list[Sampled]:
            stop = self.stop_ids_for(model)
            out = generate(model, [job.ids for job in jobs], 1, longest, stop_ids=stop,
                           pad_id=self.tokenizer.pad_token_id, seeds=[job.seed for job in jobs],
                           static=self.cuda_graphs and next(model.parameters()).device.type == "cuda")
            done = []
            for row, job in enumerate(jobs):
                ids = out.completion_ids[row][out.completion_mask[row]][:job.max_tokens].tolist()
                stopped = bool(ids) and ids[-1] in stop  # (a row ends at its stop token)
                floors = None if out.support_floors is None else out.support_floors[row, :len(ids)].tolist()
                done.append(Sampled(ids, out.logprobs[row, :len(ids)].tolist(), stopped, floors))
            return done

        return self.decoding(run)  # type: ignore[no-any-return]

    def stop_ids_for(self, model: torch.nn.Module) -> list[int]:
        """The tokens that end a message of `model` (the model `decoding` lends): the tokenizer's EOS and those its
        generation config adds (rlvr.rollout.stop_token_ids)."""
        return stop_token_ids(model, self.tokenizer)

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> None:
        """The weights are the policy's own, in place: nothing to copy (`named_tensors` is not read)."""
        self.version = version

    def fingerprint(self) -> str:
        if self._weights is None:
            raise ValueError("this LocalSampler was given no way to read its weights (weights=)")
        return weights_fingerprint(self._weights())

    def close(self) -> None:
        pass


class Interrupted(Exception):
    """Raised inside a CopySampler's forward pass once it was interrupted."""


class CopySampler(LocalSampler):
    """rlvr's own engine on a network of its own: a plain copy of the policy's (adapters merged), which only
    `load_weights` changes, so the trainer can update the policy while this samples (rollouts sampled ahead:
    rlvr.rl.ahead). `precision()` is the forward passes' precision context (the policy's autocast). It
    decodes eagerly (no CUDA graphs): a graph's replay would skip the forward hook that `interrupt` stops it by."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, precision: Callable[[], Any], **kwargs: Any) -> None:
        self.model = plain_copy(model)

        def decoding(fn: Callable[[torch.nn.Module], Any]) -> Any:
            with precision():
                return fn(self.model)
        super().__init__(decoding, tokenizer, **kwargs)
        self.holds_copy = True
        self.interrupted = threading.Event()
        self.model.register_forward_pre_hook(self._stop_if_interrupted)

    def interrupt(self) -> None:
        """Ends the sampling under way at its next forward pass (one decoding step), and any later one, with
        `Interrupted`: a run that is over does not wait for a batch it will never train on."""
        self.interrupted.set()

    def _stop_if_interrupted(self, module: torch.nn.Module, args: Any) -> None:
        if self.interrupted.is_set():
            raise Interrupted("this sampler was interrupted (the run is over)")

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> None:
        """Copies them into its network (every weight, by the plain causal LM's names)."""
        self.model.load_state_dict(dict(named_tensors), strict=True)
        self.version = version

    def fingerprint(self) -> str:
        return weights_fingerprint(self.model.state_dict().items())


def plain_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A frozen copy of `model` in eval mode, as the plain causal LM under its adapters when it has some."""
    import copy

    from rlvr.models.adapters import merged

    return merged(copy.deepcopy(model)).eval().requires_grad_(False)
