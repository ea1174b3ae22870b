"""GRPO: the trainer whose `step()` is the algorithm, run by the run core (rlvr.run) like every recipe.

    rlvr.grpo.trainer.train_grpo(config)               # a fresh run in config.output_dir
    rlvr.grpo.trainer.train_grpo(config, resume=True)  # continue it from its latest checkpoint

Under torchrun each rank samples, scores and trains on its own whole groups of every global batch
(data-parallel, rlvr.distributed.world): the loss normalisers, the batch std and the metrics are reduced over
all ranks, so a step equals the one-process step on the same global batch.

Where this departs from DeepSeekMath's Algorithm 1 (Shao et al. 2024):
- with μ = 1 (the default) π_old is the current policy, so log π_old is the detached log π_θ of the
  same forward pass: the ratio is exactly 1 and no extra forward pass is spent on it;
- all prompts of a step form one batch and one optimizer step (per μ), instead of one step per prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rlvr.config import TrainConfig
from rlvr.distributed.world import SINGLE, World, gather_across
from rlvr.envs.sampling import env_metrics
from rlvr.errors import UserError
from rlvr.grpo.process import process_batch_advantages
from rlvr.records import ScoredRollout
from rlvr.rewards.reward_model import ProcessRewardScorer
from rlvr.rl.batch import make_batch, outcome_advantages
from rlvr.rl.metrics import (
    MetricSources,
    control_metrics,
    gather_step,
    sample_groups,
    step_metrics,
    step_record,
)
from rlvr.rl.preflight import preflight
from rlvr.rl.recipe import PolicyRecipe
from rlvr.rl.turns import turn_batch_advantages
from rlvr.rl.update import policy_update
from rlvr.run.clock import Stopwatch
from rlvr.run.loop import OnStepEnd, StepResult, launch
from rlvr.run.tally import groups_with_signal


def train_grpo(config: TrainConfig, *, resume: bool = False, on_step_end: OnStepEnd | None = None,
               overwrite: bool = False) -> dict[str, Any]:
    """Run GRPO as `config` says (`resume`: continue the run in config.output_dir; `overwrite`: start afresh over
    the run it holds); return its summary."""
    return launch(Trainer, config, resume=resume, on_step_end=on_step_end, overwrite=overwrite)


class Trainer(PolicyRecipe):
    """GRPO's step over the run's parts (rlvr.rl.recipe: the policy, its optimizer, the rollout source,
    evaluation, checkpoint state)."""

    resume_hint, label, job = "rlvr train --resume {run_dir}", "GRPO", "train"

    def __init__(self, config: TrainConfig, checkpoint: Path | None = None, world: World = SINGLE):
        super().__init__(config, checkpoint, world)
        path = self.config.algorithm.process_reward_model
        self.process_scorer = ProcessRewardScorer(path) if path else None
        self.sources = MetricSources(self.parts.correctness, self.config.reflection_phrases, self.parts.format_check,
                                     self.parts.device)

    def step(self) -> StepResult:
        """One GRPO iteration (DeepSeekMath Algorithm 1, inner loop), on typed records."""
        a, o, g = self.config.algorithm, self.config.optim, self.config.generation
        clock = Stopwatch()
        with clock("rollout"):  # 1. sample G completions per prompt, 2. score them with the verifiers
            scored, fill = self.source.take(self.step_count)
        trained = self.rewarded(scored)  # (a control run's made-up rewards: rlvr.rewards.control)
        advantages = self.advantages(trained)  # 3. group-relative advantages, [N, Lc]
        with clock("logprobs"):  # 4. log π_old (μ > 1, or the sampler's of an older version) and log π_ref (β > 0)
            batch = make_batch(scored, advantages, policy=self.policy, algo=a, micro_batch_tokens=o.no_grad_tokens,
                               temperature=g.temperature, stale=scored.rollout.version < self.step_count)
        with clock("update"):  # 5. clipped surrogate + β·KL: μ optimizer steps on the same batch
            updates = [policy_update(self.policy, self.optimizer, self.scheduler, batch, algo=a,
                                     micro_batch_tokens=o.micro_batch_tokens, temperature=g.temperature,
                                     max_grad_norm=o.max_grad_norm, max_new_tokens=self.config.max_new_tokens)
                       for _ in range(a.updates_per_batch)]
        with clock("weights"):  # 6. the sampler gets the new weights; iterative GRPO: π_ref ← π_θ every K steps
            self.advance()
        record = gather_step(step_record(batch, fill, self.sources.device), self.world)  # the global batch's
        infos = gather_across(batch.rollout.env_info, self.world) if self.config.environment.name else []
        metrics = step_metrics(record, updates, clock.seconds, self.sources) | env_metrics(  # the global batch's
            [info for part in infos for info in part or []])
        if trained is not scored:  # what a control run trained on (the metrics above are the verifiers')
            metrics |= control_metrics(trained, self.world)
        if self.source.sampler.holds_copy:  # its copy was checked against the policy's weights (or the run stopped)
            metrics["sampler/weights_verified"] = 1.0
        if self.config.sampling.max_staleness is not None:  # (one version samples a whole batch: mean = max)
            staleness = float(self.step_count - 1 - scored.rollout.version)
            metrics |= {"async/staleness_mean": staleness, "async/staleness_max": staleness}
        if self.step_count == 1:  # the first batch read for signs that the run cannot learn
            self.preflight(scored, metrics)
        return StepResult(metrics, sample_groups(batch))

    def preflight(self, scored: ScoredRollout, metrics: dict[str, float]) -> None:
        c, prompt = self.config, scored.rollout.prompt_ids[0][scored.rollout.prompt_mask[0]]
        preflight(c.preflight, metrics, c.sampling.batch_size // c.sampling.group_size, c.max_new_tokens,
                  self.tokenizer.decode(prompt[-16:]), self.world.is_main)

    def advantages(self, scored: ScoredRollout) -> torch.Tensor:
        """[N, Lc] from the rewards (outcome supervision), from the rewards given each turn (per-turn credit), or
        from a process reward model's step scores."""
        if self.config.algorithm.turn_advantages == "per_turn":
            return turn_batch_advantages(scored, self.config.algorithm.advantage_eps)
        if self.process_scorer is None:
            weights = {r.name: r.weight for r in self.config.rewards or []}
            return outcome_advantages(scored, self.config.algorithm, self.world, weights)
        return process_batch_advantages(scored, self.process_scorer, self.tokenizer,
                                        self.config.algorithm.step_separator)

    def progress(self, metrics: dict[str, float]) -> dict[str, str]:
        """The bar's postfix: reward, accuracy, the learning signal (groups whose rewards differ / groups), length,
        seconds."""
        groups = self.config.sampling.batch_size // self.config.sampling.group_size
        signal = groups_with_signal(metrics, groups)
        return {"reward": f"{metrics['reward/mean']:.2f}", "acc": f"{metrics.get('accuracy', float('nan')):.2f}",
                "signal": f"{signal}/{groups}", "len": f"{metrics['completion_length/mean']:.0f}",
                "s": f"{metrics['step_seconds']:.0f}"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "critic" in state:  # a PPO run continued as GRPO would lose its critic
            raise UserError("cannot resume: this run is PPO (its checkpoint holds a critic); continue it from Python "
                            "with rlvr.PPO(..., output_dir=RUN_DIR).train(resume=True), given what the run was given")
        super().load_state_dict(state)
