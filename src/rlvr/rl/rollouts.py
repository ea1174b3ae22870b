"""Steps 1 and 2 of every step, as one source of scored rollouts: the prompt stream, the sampler, the rewards.

    trainer:  source.take(t) ─▶ ScoredRollout of batch t ─▶ … update … ─▶ source.updated(t + 1)

`RolloutSource` samples batch t when the trainer takes it, with the policy's weights of version t (its
newest). rlvr.rl.ahead's `AheadSource` is the same source with a worker thread that samples up to k
batches ahead (`sampling.max_staleness`). Either way the trainer says one thing after an update (`updated`:
the policy's weights are now version t + 1), keeps the source's `state_dict` in its checkpoints, and closes it;
what samples, when, and on which thread is the source's alone.

Completion j of prompt slot s of batch t, sampling round r, is drawn from the seed of (run seed, t, r, s, j)
(rlvr.seeds), whichever rank samples it and whenever: a batch is the same sampled now or ahead.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from rlvr.config import TrainConfig
from rlvr.config.choices import Backend
from rlvr.distributed.world import World, any_across, gather_across, shard
from rlvr.envs import load_environment
from rlvr.envs.loading import load_agent
from rlvr.harness.sampler import over_episodes
from rlvr.records import Rollout, ScoredRollout
from rlvr.rewards.batch import score_rollout
from rlvr.rewards.trainer_hooks import StepState, step_state
from rlvr.rl.build import RunParts
from rlvr.rl.curriculum import CurriculumStream
from rlvr.rl.dynamic import FillStats, fill_informative
from rlvr.rl.prompts import PromptStream
from rlvr.rl.sampling import GroupDone, score_while_sampling
from rlvr.rollout import SamplingParams
from rlvr.run.policy import Policy
from rlvr.run.samplers import push_weights, rank_sampler
from rlvr.samplers import Sampler, SampleRequest
from rlvr.seeds import seeds_for

Taken = tuple[ScoredRollout, FillStats | None]  # a batch, and what dynamic sampling did to fill it (None: off)


class RolloutSource:
    """This rank's batches, sampled synchronously: batch t when the trainer takes it, with the weights it has."""

    def __init__(self, config: TrainConfig, parts: RunParts, policy: Policy, world: World) -> None:
        s, env = config.sampling, config.environment
        self.config, self.parts, self.policy, self.world = config, parts, policy, world
        stream = CurriculumStream if config.data.curriculum else PromptStream
        self.prompts = stream(len(parts.train), s.batch_size // s.group_size, config.seed)
        # multi-turn rollouts: each sample a conversation with the environment (rlvr.envs.driven), or the run of an
        # agent that runs its own loop (rlvr.harness): either is driven over the engine (over_episodes)
        self.agent = load_agent(env.name, env.params)
        self.make_env = load_environment(env.name, **env.params) if env.name and self.agent is None else None
        self.version = 0  # the policy's weights version this source was last told of (`updated`)
        self.sampler = self.build_sampler(config.generation.backend)

    def build_sampler(self, backend: Backend) -> Sampler:
        """rlvr's own engine on the policy's weights, or vLLM (rlvr.samplers), for this rank, with the episodes
        driven over it."""
        p, c = self.parts, self.config
        engine = rank_sampler(dataclasses.replace(c.generation, backend=backend), self.world, model=p.policy,
                              decoding=self.policy.decoding, weights=self.policy.named_weights, tokenizer=p.tokenizer,
                              device=p.device, dtype=p.dtype, add_special_tokens=p.add_special_tokens, seed=c.seed)
        return self.episodes(engine)

    def episodes(self, engine: Sampler) -> Sampler:
        """What samples the run's episodes over `engine`: itself, an environment's conversations or an agent's runs."""
        return over_episodes(engine, self.config.environment, self.parts.tokenizer, self.parts.policy, self.agent,
                             self.make_env)

    # ── what the trainer asks ────────────────────────────────────────────────────────────────
    def take(self, batch: int) -> Taken:
        """Batch `batch` (0-based: what step `batch` + 1 trains on), sampled and scored now."""
        return self.sample_and_score(batch, self.synced(), self.world)

    def updated(self, version: int) -> None:
        """The policy's weights are now `version` (its updates so far): the sampler gets them, checked when it
        holds a copy (rlvr.samplers.build)."""
        self.version = version
        push_weights(self.sampler, self.policy.named_weights, version, self.world)

    def synced(self) -> Sampler:
        """The sampler, given the policy's weights first if it has not had them (a new or resumed run): what
        samples this step's batch, and what evaluations decode with."""
        if self.sampler.version != self.version:
            self.updated(self.version)
        return self.sampler

    def state_dict(self, next_batch: int) -> dict[str, Any]:
        """What a checkpoint taken before batch `next_batch` keeps of the source: the prompt stream."""
        return {"prompts": self.prompts.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """From a checkpoint's state (its "step", "prompts", and "ahead" when a run sampled ahead: the batches it
        had sampled are sampled again now, so the stream goes back to before them)."""
        self.version = state["step"]
        ahead = state.get("ahead")
        self.prompts.load_state_dict(ahead["prompts_before"] if ahead else state["prompts"])

    def close(self) -> None:
        self.sampler.close()

    # ── sampling and scoring a batch ─────────────────────────────────────────────────────────
    def sample_and_score(self, batch: int, sampler: Sampler, world: World) -> Taken:
        """The P prompts of batch `batch` sampled with `sampler` and scored, agreeing with the other ranks in
        `world`; with dynamic sampling (DAPO), zero-variance groups are replaced by fresh ones. A failure (a
        reward that raised, a step abandoned) leaves the prompt stream as it was: the batch never happened."""
        s = self.config.sampling
        order = copy.deepcopy(self.prompts.state_dict())
        try:
            first = self.score_round(0, batch, sampler, world)
            if not s.dynamic_sampling:
                return first, None
            return fill_informative(first, lambda round_: self.score_round(round_, batch, sampler, world),
                                    s.max_sampling_rounds, all_done=lambda done: not any_across(not done, world))
        except BaseException:
            self.prompts.load_state_dict(order)
            raise

    def score_round(self, round_: int, batch: int, sampler: Sampler, world: World) -> ScoredRollout:
        """This rank's share of the next P prompts, sampled and scored; every group's pass rate, from all
        ranks, is shown to the prompt stream (curriculum), so that its state stays the same on every rank."""
        drawn = self.prompts.next_batch()
        slots = shard(range(len(drawn)), world)  # (the prompts' places in the whole batch: their seeds)
        positions = [drawn[i] for i in slots]
        examples, g = [self.parts.train[i].example for i in positions], self.config.sampling.group_size
        state = self.step_state(batch, world)
        if self.config.sampling.overlap_rewards and not self.config.environment.name:
            scored = score_while_sampling(lambda done: self.sample(positions, batch, sampler, done, round_, slots),
                                          examples, g, self.parts.rewards, concurrent=self.parts.device.type != "cpu",
                                          state=state)
        else:
            scored = score_rollout(self.sample(positions, batch, sampler, round_=round_, slots=slots),
                                   self.parts.rewards, state)
        if self.parts.correctness is not None:  # (without one there is no curriculum: rlvr.rl.reward_setup)
            accuracies = scored.reward_components[self.parts.correctness].nanmean(dim=1).tolist()
            for seen, rates in gather_across((positions, accuracies), world):
                self.prompts.observe(seen, rates)
        return scored

    def step_state(self, batch: int, world: World) -> StepState:
        """What a reward that names TRL's `trainer_state` is told of batch `batch`'s step: known before it is
        sampled, so the same sampled now, ahead or again after a resume (rlvr.rewards.trainer_hooks)."""
        c = self.config
        return step_state(batch, c.max_steps, c.algorithm.updates_per_batch, c.sampling.batch_size //
                          c.sampling.group_size, len(self.parts.train), world.is_main)

    def sample(self, positions: list[int], batch: int, sampler: Sampler, on_group_done: GroupDone | None = None,
               round_: int = 0, slots: list[int] | None = None) -> Rollout:
        """G completions for each training prompt at `positions` (at `slots` of the batch's whole set of prompts;
        by default their order here) by `sampler`, tagged with the version of the weights it holds."""
        gen, c = self.config.generation, self.config
        params = SamplingParams(c.max_new_tokens, gen.temperature, gen.top_p, gen.top_k)
        requests = [SampleRequest(self.parts.train[i], tuple(seeds_for(c.seed, batch, round_, slot,
                                                                       c.sampling.group_size)))
                    for i, slot in zip(positions, range(len(positions)) if slots is None else slots)]
        return dataclasses.replace(sampler.sample(requests, params, on_group_done), version=sampler.version)
