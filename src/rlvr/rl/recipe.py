"""What GRPO and PPO share, as one base their recipes extend with a `step()`: the run's parts (rlvr.rl.build),
the `Policy` handle, its optimizer, the rollout source, the held-out evaluation and the checkpoint state.

    PolicyRecipe ─┬─ GRPO  (rlvr.grpo.trainer.Trainer):  group-relative advantages
                  └─ PPO   (rlvr.ppo.trainer.PPOTrainer): a critic and GAE

The run core (rlvr.run.loop) runs either one; each step ends in `advance()`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar

import torch

from rlvr import paths
from rlvr.config import TrainConfig
from rlvr.distributed.world import SINGLE, World
from rlvr.errors import UserError
from rlvr.optim import build_optimizer, load_schedule
from rlvr.records import Evaluation, ScoredRollout
from rlvr.rewards.control import controlled
from rlvr.rl import evaluation
from rlvr.rl.ahead import AheadSource
from rlvr.rl.build import build_parts, with_environment_data
from rlvr.rl.rollouts import RolloutSource
from rlvr.run.loop import Schedule
from rlvr.run.policy import Policy


class PolicyRecipe:
    """A policy trained on rollouts of the run's prompts: everything of a GRPO or PPO run but its step."""

    resume_hint: ClassVar[str]
    label: ClassVar[str]
    job: ClassVar[str]

    @property
    def updates_per_step(self) -> int:
        """Optimizer steps a step takes: GRPO's μ (algorithm.updates_per_batch) on each sampled batch."""
        return self.config.algorithm.updates_per_batch

    def __init__(self, config: TrainConfig, checkpoint: Path | None = None, world: World = SINGLE):
        """The policy (from `checkpoint` when resuming), reference, prompts, rewards and optimizer of a run,
        on this rank of `world`."""
        s = config.sampling
        prompts_per_step = s.batch_size // s.group_size
        if prompts_per_step % world.size:
            raise UserError(f"sampling.batch_size={s.batch_size} is {prompts_per_step} prompts a step "
                            f"(group_size {s.group_size}), which {world.size} ranks cannot share whole: make "
                            f"batch_size / group_size a multiple of {world.size}")
        config.check_ranks(world.size)  # (what it cannot run on these ranks, before the models load)
        self.world = world
        config = with_environment_data(config)  # (a verifiers environment's own dataset, recorded as the data)
        self.parts = p = build_parts(config, checkpoint)
        # the effective config (config.yaml) records the rewards as run (which one is the correctness reward) and
        # the rollout correction as the precision decided it
        correction = config.algorithm.rollout_correction.for_precision(bf16=p.dtype == torch.bfloat16)
        self.config = c = dataclasses.replace(config, rewards=p.reward_entries, algorithm=dataclasses.replace(
            config.algorithm, rollout_correction=correction))
        self.tokenizer, self.memory_plan = p.tokenizer, p.memory_plan  # (the plan: said once the run starts)
        # π_θ as the ranks train it, and π_ref when β > 0: a frozen copy, or with LoRA the policy's own network
        # with its adapters off (rlvr.run.policy)
        self.policy = Policy(p.policy, device=p.device, dtype=p.dtype, world=world, strategy=c.distributed.strategy,
                             reference=p.reference, with_reference=c.algorithm.beta > 0)
        # steps 1-2: prompts, sampler, rewards; sampled when taken, or ahead by a worker (sampling.max_staleness)
        source = RolloutSource if s.max_staleness is None else AheadSource
        self.source: RolloutSource = source(c, p, self.policy, world)
        # the schedule spans every optimizer step the run takes: μ = updates_per_batch of them a step in GRPO
        self.optimizer, self.scheduler = build_optimizer(p.policy, c.optim, c.max_steps * self.updates_per_step)
        self.step_count = 0
        self.schedule = Schedule(c.max_steps, c.save_every, c.eval_every, c.sample_every, c.eval_before, c.eval_after,
                                 c.keep_checkpoints, c.keep_best)

    def advance(self) -> None:
        """After a step's updates: the step is counted, the rollout source is told of the policy's new weights,
        and π_ref ← π_θ every `ref_refresh_steps` steps (DeepSeekMath Algorithm 1, iterative RL), when asked for."""
        self.step_count += 1
        self.source.updated(self.step_count)
        k = self.config.algorithm.ref_refresh_steps
        if k and self.step_count % k == 0:
            self.policy.refresh_reference()

    def rewarded(self, scored: ScoredRollout) -> ScoredRollout:
        """What the step trains on: `scored` as the verifiers scored it, or with a control run's made-up rewards
        (rlvr.rewards.control); the run logs the verifiers' own either way."""
        weights = {spec.name: spec.weight for spec in self.parts.rewards}
        return controlled(scored, self.config.control, weights, self.config.seed, self.step_count)

    def close(self) -> None:
        self.source.close()

    # ── what the run core asks of a recipe ───────────────────────────────────────────────────
    def evaluate(self) -> Evaluation | None:
        result = evaluation.held_out(self.source.synced(), self.parts, self.config, self.step_count, self.world)
        if result is None:
            return None
        return Evaluation(result, evaluation.eval_metrics(result), evaluation.describe(result))

    def summary(self, before: dict[str, Any] | None, after: dict[str, Any] | None, seconds: float,
                checkpoint: Path) -> dict[str, Any]:
        """summary.json's content; heldout.json written beside it (rank 0)."""
        if self.world.is_main and (before or after):
            held = evaluation.verdicts(self.parts, before, after)
            (Path(self.config.output_dir) / paths.HELDOUT).write_text(json.dumps(held) + "\n")
        return evaluation.summary(self.config, self.parts, self.step_count, before, after, seconds)

    def compared(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
        return evaluation.compared(before, after)

    def write_checkpoint(self, folder: Path) -> None:
        """model/ (policy and tokenizer, loadable by transformers), and reference/ once it has been refreshed."""
        # (the reference with the tokenizer: resuming loads it as a model directory like any other)
        self.policy.write(folder / paths.MODEL, self.tokenizer,
                          folder / paths.REFERENCE if self.reference_refreshed() else None)

    def reference_refreshed(self) -> bool:
        k = self.config.algorithm.ref_refresh_steps
        return bool(k) and self.step_count >= k

    def state_dict(self) -> dict[str, Any]:
        """Scheduler, the rollout source's state (the prompt stream; batches sampled ahead) and (one process) the
        optimizer keyed by parameter name; sharded, the weights are gathered here too, for write_checkpoint
        (rank 0). Every rank calls this."""
        self.policy.gather(reference=self.reference_refreshed())
        state = {"scheduler": self.scheduler.state_dict(), **self.source.state_dict(self.step_count)}
        if not self.world.distributed:  # (several ranks write it in parts: sharded_state)
            state["optimizer"] = self.policy.optimizer_state(self.optimizer)
        return state

    def sharded_state(self) -> dict[str, Any]:
        """The policy and its optimizer as this rank holds them (shards under FSDP), keyed by parameter name,
        for torch.distributed.checkpoint (rlvr.run.sharded)."""
        return self.policy.sharded_state(self.optimizer)

    def load_sharded(self, checkpoint: Path) -> None:
        """The policy and optimizer from the parts several ranks wrote, at this world size."""
        self.policy.load_sharded(checkpoint, self.optimizer)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "optimizer" in state:  # (else in the checkpoint's parts: load_sharded)
            self.policy.load_optimizer_state(self.optimizer, state["optimizer"])
        load_schedule(self.scheduler, state["scheduler"])  # (more steps given: the longer schedule)
        self.source.load_state_dict(state)
        self.step_count = state["step"]
