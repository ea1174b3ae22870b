"""PPO: GRPO's rollout, rewards and clipped update, with a critic and GAE in place of the group baseline.

    one step:  sample G completions per prompt ─▶ rewards ─▶ values V(s_t) from the critic
               ─▶ token rewards (reward at the end, −β·KL on every token) ─▶ GAE ─▶ whitened advantages [N, Lc]
               ─▶ the policy's clipped update (rlvr.train.update.policy_update) ─▶ the critic's clipped value update

The critic is a copy of the policy's transformer with a scalar head: a second model, its gradients
and its AdamW state — the memory GRPO saves (DeepSeekMath §4.1). Everything else is the GRPO
trainer's, composed rather than re-implemented (`self.grpo`); the run core runs it like any recipe.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import torch

from rlvr.config import TrainConfig
from rlvr.errors import UserError
from rlvr.logprobs import predicting_hidden
from rlvr.models.adapters import decoder
from rlvr.ppo.gae import ppo_advantages, value_loss
from rlvr.records import Rollout
from rlvr.run.clock import Stopwatch
from rlvr.run.loop import OnStepEnd, StepResult, launch
from rlvr.run.parallel import Trained
from rlvr.run.world import SINGLE, World
from rlvr.train.batch import make_batch, micro_batches
from rlvr.train.trainer import Trainer
from rlvr.train.update import policy_update


def train_ppo(config: TrainConfig, *, resume: bool = False, on_step_end: OnStepEnd | None = None) -> dict[str, Any]:
    """Run PPO on the job `config` describes, its critic and GAE as `config.ppo` says (`resume`: continue the
    run in config.output_dir, with the settings its config.yaml recorded); return its summary."""
    return launch(PPOTrainer, config, resume=resume, on_step_end=on_step_end)


class ValueModel(torch.nn.Module):
    """V(s_t): the policy's transformer (a copy) with a linear head, read where each completion token is predicted."""

    def __init__(self, policy: torch.nn.Module):
        super().__init__()
        self.backbone = copy.deepcopy(decoder(policy))  # with LoRA: the adapted backbone, its own adapters train
        self.head = torch.nn.Linear(policy.config.hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, prompt_ids, prompt_mask, completion_ids, completion_mask) -> torch.Tensor:
        """Values [m, Lc] on the CPU, whatever device the critic is on."""
        device = self.head.weight.device
        args = [t.to(device) for t in (prompt_ids, prompt_mask, completion_ids, completion_mask)]
        hidden = predicting_hidden(self.backbone, *args)
        return (self.head(hidden).squeeze(-1) * args[3]).float().cpu()  # [m, Lc]


class PPOTrainer:
    resume_hint = "rlvr.ppo.trainer.train_ppo(resume_config(TrainConfig, '{run_dir}'), resume=True)"
    label, job = "PPO", "ppo"

    def __init__(self, config: TrainConfig, checkpoint: Path | None = None, world: World = SINGLE):
        if world.distributed:
            raise UserError("PPO runs in one process (its critic is not data-parallel): start it without torchrun, "
                            "or train GRPO on several ranks")
        self.grpo, self.world = Trainer(config, checkpoint), world
        self.config, self.schedule = self.grpo.config, self.grpo.schedule  # (the rewards as run)
        settings = self.settings = config.ppo
        device, dtype = self.grpo.parts.device, self.grpo.parts.dtype
        # the critic's handle: its network as the step runs it (rlvr.run.parallel), its AdamW at a constant rate
        self.critic = Trained(ValueModel(self.grpo.policy.model).to(device), world, "ddp", device, dtype)
        self.critic_optimizer = torch.optim.AdamW(self.critic.module.parameters(), lr=settings.critic_lr)
        # what the run core asks of a recipe and PPO does as GRPO does
        self.evaluate, self.eval_metrics, self.describe = self.grpo.evaluate, self.grpo.eval_metrics, self.grpo.describe
        self.write_checkpoint, self.summary = self.grpo.write_checkpoint, self.grpo.summary
        self.close = self.grpo.close

    @property
    def step_count(self) -> int:
        return self.grpo.step_count

    def step(self) -> StepResult:
        t, c, s = self.grpo, self.config, self.settings
        clock = Stopwatch()
        with clock("rollout"):
            scored, _ = t.sample_and_score()
        rollout = scored.rollout
        unscored = scored.rewards.isnan().view(-1)  # no reward to learn from (rlvr.rewards.batch.unscored)
        mask = rollout.completion_mask & ~unscored[:, None]
        with clock("logprobs"):
            batch = make_batch(scored, torch.zeros(mask.shape), policy=t.policy, algo=c.algorithm,
                               micro_batch_tokens=c.optim.no_grad_tokens, temperature=c.generation.temperature)
            values = self.values(rollout)
        advantages, returns = ppo_advantages(scored.rewards.view(-1).nan_to_num(0.0), rollout.sampling_logprobs,
                                             batch.ref_logprobs, values, mask, beta=c.algorithm.beta, gamma=s.gamma,
                                             lam=s.lam)
        batch = dataclasses.replace(batch, advantages=advantages, ref_logprobs=None)  # the KL is in the rewards now
        with clock("update"):
            no_kl = dataclasses.replace(c.algorithm, beta=0.0)
            stats = policy_update(t.policy, t.optimizer, t.scheduler, batch, algo=no_kl,
                                  micro_batch_tokens=c.optim.micro_batch_tokens, temperature=c.generation.temperature,
                                  max_grad_norm=c.optim.max_grad_norm, max_new_tokens=c.generation.max_new_tokens)
            stats["value_loss"] = self.update_critic(rollout, values, returns, mask)
        t.advance()  # the step counted, the sampler given the new weights
        return StepResult({**stats, "reward/mean": float(scored.rewards.nanmean()),
                           "reward/unscored": int(unscored.sum()),
                           "completion_length/mean": float(rollout.lengths.float().mean()),
                           **{f"time/{k}": v for k, v in clock.seconds.items()},
                           "step_seconds": sum(clock.seconds.values())})

    @torch.no_grad()
    def values(self, rollout: Rollout) -> torch.Tensor:
        out = torch.zeros(rollout.completion_ids.shape)
        for mb in micro_batches(rollout, rollout.completion_mask, self.config.optim.no_grad_tokens,
                                share_prompt=False):
            v = self.critic(mb.prompt_ids[mb.row_prompt], mb.prompt_mask[mb.row_prompt], mb.completion_ids,
                            mb.completion_mask)
            out[mb.rows, : v.shape[1]] = v
        return out

    def update_critic(self, rollout: Rollout, old_values: torch.Tensor, returns: torch.Tensor,
                      mask: torch.Tensor) -> float:
        """One AdamW step on the clipped value loss ½·max((V − R)², (V_clip − R)²), token mean over the
        `mask`ed tokens (the completions that have a reward)."""
        tokens = float(mask.sum().clamp(min=1))
        clip, total = self.settings.value_clip, 0.0
        self.critic_optimizer.zero_grad(set_to_none=True)
        runs = micro_batches(rollout, mask, self.config.optim.micro_batch_tokens, share_prompt=False)
        for i, mb in enumerate(runs):
            lc = mb.completion_ids.shape[1]
            v = self.critic(mb.prompt_ids[mb.row_prompt], mb.prompt_mask[mb.row_prompt], mb.completion_ids,
                            mb.completion_mask)
            loss = value_loss(v, old_values[mb.rows, :lc], returns[mb.rows, :lc], mb.loss_mask, clip, tokens)
            with self.critic.accumulating(last=i == len(runs) - 1):
                loss.backward()
            total += float(loss.detach())
        self.critic.optimizer_step(self.critic_optimizer, None, max_grad_norm=1.0)
        return total

    def progress(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"reward": f"{metrics['reward/mean']:.2f}", "value_loss": f"{metrics['value_loss']:.3f}"}

    def state_dict(self) -> dict[str, Any]:
        """GRPO's state plus the critic's weights and optimizer (the critic is not a transformers model of its own)."""
        return {**self.grpo.state_dict(), "critic": self.critic.module.state_dict(),
                "critic_optimizer": self.critic_optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.grpo.load_state_dict({k: v for k, v in state.items() if not k.startswith("critic")})
        self.critic.module.load_state_dict(state["critic"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
