"""Rollouts sampled ahead (`sampling.max_staleness: k`): a worker thread samples and scores batch t with the
policy's weights of version max(0, t − k) while the trainer updates on an earlier batch.

    trainer:  … train batch t (its weights: version t) ─▶ publish version t + 1 ─▶ take batch t + 1 …
    worker:   … sample batch t + k with version t (as soon as it is published) ─▶ batch t + k + 1 …

Which weights sample which batch follows the step counters alone: batch t always waits for version
max(0, t − k), never takes a newer one that happens to be there, and its completions are drawn from
seeds of (run seed, t, …) (rlvr.seeds). So a run is the same whatever the timing: k = 0 is the synchronous
run (batch t sampled with the weights of step t), and k = 1 repeated or resumed is itself, bit for bit.
The trainer never trains on a batch more than k versions old (IMPALA, Espeholt et al. 2018, and the
bounded staleness of Stale Synchronous Parallel, Ho et al. 2013).

Weights reach the worker only as published copies (a Sampler's `load_weights` loads them into its own
copy of the network), so the trainer's in-place updates never touch a batch being sampled. What the worker
sampled but the trainer has not trained on yet is part of a checkpoint (`state`): resuming restores those
batches, the prompt stream as it was after them, and goes on sampling from there.
"""

from __future__ import annotations

import copy
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rlvr.config import TrainConfig
from rlvr.deadline import call_with_time_limit, overdue_in
from rlvr.distributed.world import World, barrier, gather_across, own_group
from rlvr.errors import StepAbandoned, UserError
from rlvr.rl.build import RunParts
from rlvr.rl.rollouts import RolloutSource, Taken
from rlvr.run.policy import Policy
from rlvr.samplers import Sampler

Weights = list[tuple[str, torch.Tensor]]


@dataclass(frozen=True)
class Sampled:
    """One batch as the worker made it: what `produce` returned, the version that sampled it, and the prompt
    stream's state after it (what a checkpoint taken before the next batch records)."""

    batch: int
    version: int
    result: Any
    stream_state: dict[str, Any]


def version_for(batch: int, max_staleness: int) -> int:
    """The weights version that samples batch `batch` (0-based: the batch step `batch` + 1 trains on).

    >>> [version_for(t, 0) for t in range(4)], [version_for(t, 2) for t in range(4)]
    ([0, 1, 2, 3], [0, 0, 0, 1])
    """
    return max(0, batch - max_staleness)


class RolloutsAhead:
    """The worker thread and what passes between it and the trainer (see the module docstring).

    `produce(batch, sampler)` samples and scores batch `batch` with `sampler` (holding the version it must);
    `stream_state()` reads the prompt stream's state, which only `produce` moves; `load(weights, version)`
    gives the sampler a version (default: its load_weights). `timeout_s` bounds how long the trainer waits
    for a batch: past it, the run stops with one line (the worker stalled). `end`: the first batch no step will
    train on (the run's max_steps): the worker samples none from it on (a paid reward is not paid for nothing,
    and a checkpoint waits for no batch the run cannot use)."""

    def __init__(self, sampler: Sampler, produce: Callable[[int, Sampler], Any],
                 stream_state: Callable[[], dict[str, Any]], *, max_staleness: int, first_batch: int,
                 pending: list[Sampled] | None = None, timeout_s: float = 900.0,
                 load: Callable[[Weights, int], None] | None = None, end: int | None = None) -> None:
        self.sampler, self.produce, self.stream_state = sampler, produce, stream_state
        self.load = load or (lambda weights, version: sampler.load_weights(weights, version=version))
        self.k, self.timeout_s, self.end = max_staleness, timeout_s, end
        self.ready: dict[int, Sampled] = {s.batch: s for s in pending or []}
        self.after = {s.batch: s.stream_state for s in pending or []}  # batch -> the prompt stream after it
        self.next_batch = first_batch + len(self.ready)  # the next one the worker samples
        self.initial_state = stream_state()  # (the stream as resumed: after the pending batches)
        self.loaded: int | None = None  # the version the sampler holds
        self.floor: int | None = None  # the first version published: a resumed run's (no older one exists)
        self.weights: dict[int, Weights] = {}
        self.error: BaseException | None = None
        self.stopping, self.stalled = False, False
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._work, name="rlvr-rollouts-ahead", daemon=True)
        self.thread.start()

    # ── the trainer's side ───────────────────────────────────────────────────────────────────
    def publish(self, version: int, weights: Weights) -> None:
        """The policy's weights after `version` updates, as copies the trainer will not change."""
        with self.changed:
            self.weights[version] = weights
            self.floor = version if self.floor is None else self.floor
            self.changed.notify_all()

    def take(self, batch: int) -> Sampled:
        """Batch `batch`, once sampled (waiting for it); the worker's failure is raised here, and so is a user's
        function in the worker past its time limit (a reward's timeout_s). Ctrl-C or SIGTERM gives the wait up
        (the step is abandoned, rlvr.deadline): the checkpoint then keeps what is ready, without waiting."""
        try:
            return call_with_time_limit(f"the rollout worker's batch {batch + 1}",  # type: ignore[no-any-return]
                                        lambda: self._wait_for(batch), {}, None, "sampling.worker_timeout_s")
        except BaseException:
            self.stalled = True  # (given up on: a checkpoint now keeps what is ready, without waiting)
            raise

    def _wait_for(self, batch: int) -> Sampled:
        deadline = time.monotonic() + self.timeout_s
        with self.changed:
            while batch not in self.ready:
                if isinstance(self.error, (UserError, StepAbandoned)):  # (a user's mistake, said in one line)
                    raise self.error
                if self.error is not None:
                    raise UserError(f"the rollout worker failed while sampling batch {batch + 1}: "
                                    f"{type(self.error).__name__}: {self.error}") from self.error
                late = overdue_in(self.thread)
                if late is not None:
                    raise UserError(f"{late.name} did not return within its time limit of {late.seconds:g} s in "
                                    f"the worker sampling ahead (make it faster, or raise {late.setting}; 0 = no "
                                    "limit); the last checkpoint is kept")
                left = deadline - time.monotonic()
                if left <= 0 or not self.thread.is_alive():
                    raise UserError(f"the rollout worker has not sampled batch {batch + 1} in {self.timeout_s:.0f} s"
                                    " (sampling.worker_timeout_s): it stalled; the last checkpoint is kept")
                self.changed.wait(min(left, 1.0))
            return self.ready.pop(batch)

    def state(self, next_batch: int) -> dict[str, Any]:
        """What a checkpoint before batch `next_batch` keeps: the batches sampled for it and the k − 1 after it
        (waiting for them: their weights are published already), and the prompt stream after them. A worker
        that failed leaves fewer: a resumed run samples the rest with the checkpoint's weights."""
        last = next_batch + self.k - 1  # (batches up to it need versions up to next_batch − 1)
        if self.end is not None:
            last = min(last, self.end - 1)
        with self.changed:
            while self._working() and any(b not in self.ready for b in range(next_batch, last + 1)):
                self.changed.wait(1.0)
            kept = []
            for b in range(next_batch, last + 1):
                if b not in self.ready:
                    break
                kept.append(self.ready[b])
            after = (kept[-1].batch if kept else next_batch - 1)
            stream, before = (self.after.get(b, self.initial_state) for b in (after, next_batch - 1))
            for old in [b for b in self.after if b < next_batch - 1]:
                del self.after[old]
        return {"pending": kept, "prompts": stream, "prompts_before": before}

    def _working(self) -> bool:
        """Whether the worker may still deliver: not failed, not given up on, alive."""
        return not self.stalled and self.error is None and self.thread.is_alive()

    def close(self) -> None:
        """Stops the worker: a batch being sampled is given up at its next decoding step where the sampler can
        be interrupted (a CopySampler), else it finishes on its own (the thread is a daemon). A process that
        exits while its daemon thread is inside a CUDA kernel launch can abort at exit."""
        with self.changed:
            self.stopping = True
            self.changed.notify_all()
        interrupt = getattr(self.sampler, "interrupt", None)
        if interrupt is not None:
            interrupt()
        self.thread.join(timeout=5.0)

    # ── the worker's side ────────────────────────────────────────────────────────────────────
    def _work(self) -> None:
        try:
            while True:
                batch = self.next_batch
                if self.end is not None and batch >= self.end:
                    return  # (the trainer takes no batch past the run's last)
                with self.changed:
                    while self.floor is None and not self.stopping:
                        self.changed.wait()
                    version = max(version_for(batch, self.k), self.floor or 0)
                    while version not in self.weights and not self.stopping:
                        self.changed.wait()
                    if self.stopping:
                        return
                    weights = self.weights[version]
                    for old in [v for v in self.weights if v < version]:
                        del self.weights[old]  # (no later batch needs them)
                if self.loaded != version:
                    self.load(weights, version)
                    self.loaded = version
                result = self.produce(batch, self.sampler)
                with self.changed:
                    self.after[batch] = self.stream_state()
                    self.ready[batch] = Sampled(batch, version, result, self.after[batch])
                    self.next_batch = batch + 1
                    self.changed.notify_all()
        except BaseException as error:  # (the trainer raises it when it takes the batch)
            with self.changed:
                self.error = error
                self.changed.notify_all()


class AheadSource(RolloutSource):
    """rlvr.rl.rollouts' source with a worker sampling ahead (`RolloutsAhead`, started at the first batch taken):
    with vLLM, the engine is the worker's and evaluations decode with rlvr's engine on the policy's weights;
    otherwise the worker samples with a copy of the policy (a CopySampler), given the weights of each version."""

    def __init__(self, config: TrainConfig, parts: RunParts, policy: Policy, world: World) -> None:
        super().__init__(config, parts, policy, world)
        self.worker_sampler: Sampler | None = None  # vLLM's engine, the worker's own (None: a copy of the policy)
        if config.generation.backend != "local":
            self.worker_sampler, self.sampler = self.sampler, self.build_sampler("local")
        self.ahead: RolloutsAhead | None = None  # the worker, once started
        self.pending: list[Sampled] = []  # batches it sampled before a checkpoint, given back to it on resume
        self.resumed: dict[str, Any] | None = None  # what the checkpoint resumed from kept of them

    def take(self, batch: int) -> Taken:
        if self.ahead is None:
            self.ahead = self._start(batch)
        return self.ahead.take(batch).result  # type: ignore[no-any-return]

    def updated(self, version: int) -> None:
        """As the synchronous source, and the worker gets copies of these weights (the trainer goes on updating
        its own)."""
        super().updated(version)
        if self.ahead is not None:
            self._publish(version)

    def _publish(self, version: int) -> None:
        assert self.ahead is not None
        self.ahead.publish(version, [(n, t.detach().clone()) for n, t in self.policy.named_weights()])

    def state_dict(self, next_batch: int) -> dict[str, Any]:
        """The batches sampled ahead (each rank's share) and the prompt stream after them."""
        if self.ahead is not None:
            ahead = self.ahead.state(next_batch)
            return {"prompts": ahead["prompts"], "ahead": {"pending": gather_across(ahead["pending"], self.world),
                                                           "prompts_before": ahead["prompts_before"]}}
        state = super().state_dict(next_batch)
        return state | {"ahead": self.resumed} if self.pending else state  # (resumed, not started yet)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.version = state["step"]
        self.prompts.load_state_dict(state["prompts"])
        self.resumed = ahead = state.get("ahead")
        if ahead and len(ahead["pending"]) == self.world.size:  # the batches sampled ahead, this rank's share
            self.pending = ahead["pending"][self.world.rank]
        elif ahead:  # at another world size the shares differ: sampled again, with the checkpoint's weights
            self.prompts.load_state_dict(ahead["prompts_before"])

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
        super().close()
        if self.worker_sampler is not None:
            self.worker_sampler.close()

    def _start(self, batch: int) -> RolloutsAhead:
        """The worker, from batch `batch` on, sampling with vLLM's engine or a copy of the policy, given the
        weights of the version each batch needs and checked to hold them (rlvr.samplers.build.give_weights); with
        the copy, half of the torch threads to each side (at least one)."""
        from rlvr.samplers.build import give_weights
        from rlvr.samplers.local import CopySampler

        p, c = self.parts, self.config
        if self.worker_sampler is None:  # (vLLM's CPU engine keeps the threads it was built with: it checks them)
            torch.set_num_threads(max(1, torch.get_num_threads() // 2))
            if p.device.type == "cuda" and self.world.rank == 0:
                print("rlvr: sampling ahead with rlvr's own engine on a GPU was measured slower than the synchronous "
                      "loop (decoding and training share one process: docs/async.md); a vLLM server on a GPU of its "
                      "own (generation.backend vllm) is what overlaps", file=sys.stderr)
        sampler = self.worker_sampler or self.episodes(CopySampler(p.policy, p.tokenizer, self.policy.autocast,
                                                                   add_special_tokens=p.add_special_tokens))
        world = own_group(self.world)  # (every rank starts it at the same step)
        self.ahead = RolloutsAhead(sampler, lambda b, s: self.sample_and_score(b, s, world),
                                   lambda: copy.deepcopy(self.prompts.state_dict()),
                                   max_staleness=c.sampling.max_staleness or 0, first_batch=batch,
                                   pending=self.pending, timeout_s=c.sampling.worker_timeout_s, end=c.max_steps,
                                   load=lambda weights, version: give_weights(sampler, lambda: iter(weights), version,
                                                                              loaded=lambda: barrier(world)))
        self._publish(self.version)
        return self.ahead
