"""PPO: a peer of GRPO over the same run parts (rlvr.rl.recipe: the policy, its optimizer, the rollout source,
evaluation), with a critic and GAE in place of the group baseline.

    one step:  sample G completions per prompt ─▶ rewards ─▶ values V(s_t) from the critic (rlvr.ppo.critic)
               ─▶ token rewards (reward at the end, −β·KL on every token) ─▶ GAE ─▶ whitened advantages [N, Lc]
               ─▶ the policy's clipped update (rlvr.rl.update.policy_update, no KL term: it is in the rewards)
               ─▶ the critic's clipped value update
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr.config import TrainConfig
from rlvr.distributed.world import SINGLE, World
from rlvr.errors import UserError
from rlvr.ppo.critic import Critic
from rlvr.ppo.gae import ppo_advantages
from rlvr.rl.batch import batch_logprobs, make_batch
from rlvr.rl.recipe import PolicyRecipe
from rlvr.rl.update import policy_update
from rlvr.run.clock import Stopwatch
from rlvr.run.loop import OnStepEnd, StepResult, launch


def train_ppo(config: TrainConfig, *, resume: bool = False, on_step_end: OnStepEnd | None = None,
              overwrite: bool = False) -> dict[str, Any]:
    """Run PPO on the job `config` describes, its critic and GAE as `config.ppo` says (`resume`: continue the
    run in config.output_dir, with the settings its config.yaml recorded; `overwrite`: start afresh over the run
    it holds); return its summary."""
    return launch(PPOTrainer, config, resume=resume, on_step_end=on_step_end, overwrite=overwrite)


class PPOTrainer(PolicyRecipe):
    resume_hint = "rlvr.PPO(..., output_dir='{run_dir}').train(resume=True), from Python with what the run was given"
    label, job = "PPO", "ppo"
    updates_per_step = 1  # (one policy update a step: rlvr.ppo)

    def __init__(self, config: TrainConfig, checkpoint: Path | None = None, world: World = SINGLE):
        if world.distributed:
            raise UserError("PPO runs in one process (its critic is not data-parallel): start it without torchrun, "
                            "or train GRPO on several ranks")
        if config.sampling.max_staleness is not None:
            raise UserError("PPO samples each batch with the newest weights (its critic's values and the update "
                            "assume it): set sampling.max_staleness null, or train GRPO to sample ahead")
        if config.algorithm.turn_advantages != "return":
            raise UserError("PPO's advantages are its critic's (GAE): algorithm.turn_advantages: per_turn is GRPO's; "
                            "drop it, or train GRPO")
        super().__init__(config, checkpoint, world)
        o, p = self.config.optim, self.parts
        self.critic = Critic(self.policy.model, self.config.ppo, world, p.device, p.dtype,
                             micro_batch_tokens=o.micro_batch_tokens, no_grad_tokens=o.no_grad_tokens)

    def step(self) -> StepResult:
        c, s, a = self.config, self.config.ppo, self.config.algorithm
        o, g = c.optim, c.generation
        clock = Stopwatch()
        with clock("rollout"):
            scored, _ = self.source.take(self.step_count)
        rollout = scored.rollout
        unscored = scored.rewards.isnan().view(-1)  # no reward to learn from (rlvr.rewards.batch.unscored)
        mask = rollout.completion_mask & ~unscored[:, None]
        with clock("logprobs"):  # log π_ref for the token rewards' KL, and V(s_t)
            ref = (batch_logprobs(self.policy, rollout, o.no_grad_tokens, g.temperature, reference=True)
                   if self.policy.reference is not None and a.beta > 0 else None)
            values = self.critic.values(rollout)
        rewards = self.rewarded(scored).rewards  # (a control run's made-up ones: rlvr.rewards.control)
        advantages, returns = ppo_advantages(rewards.view(-1).nan_to_num(0.0), rollout.sampling_logprobs,
                                             ref, values, mask, beta=a.beta, gamma=s.gamma, lam=s.lam)
        with clock("logprobs"):  # log π_old when μ > 1; the batch without log π_ref: the KL is in the rewards
            batch = make_batch(scored, advantages, policy=self.policy, algo=a, micro_batch_tokens=o.no_grad_tokens,
                               temperature=g.temperature, kl_penalty=False)
        with clock("update"):
            stats = policy_update(self.policy, self.optimizer, self.scheduler, batch, algo=a,
                                  micro_batch_tokens=o.micro_batch_tokens, temperature=g.temperature,
                                  max_grad_norm=o.max_grad_norm, max_new_tokens=c.max_new_tokens)
            stats["value_loss"] = self.critic.update(rollout, values, returns, mask)
        self.advance()  # the step counted, the sampler given the new weights
        return StepResult({**stats, "reward/mean": float(scored.rewards.nanmean()),
                           "reward/unscored": int(unscored.sum()),
                           "completion_length/mean": float(rollout.lengths.float().mean()),
                           **{f"time/{k}": v for k, v in clock.seconds.items()},
                           "step_seconds": sum(clock.seconds.values())})

    def progress(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"reward": f"{metrics['reward/mean']:.2f}", "value_loss": f"{metrics['value_loss']:.3f}"}

    def state_dict(self) -> dict[str, Any]:
        """The policy's run state plus the critic's weights and optimizer (the critic is not a transformers model
        of its own)."""
        return {**super().state_dict(), **self.critic.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "critic" not in state:  # a GRPO run continued as PPO would start its critic from nothing
            raise UserError("cannot resume: this run is GRPO (its checkpoint holds no critic); continue it with "
                            "rlvr train --resume RUN_DIR")
        super().load_state_dict({k: v for k, v in state.items() if not k.startswith("critic")})
        self.critic.load_state_dict(state)
