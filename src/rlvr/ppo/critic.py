"""PPO's critic: V(s_t) from a copy of the policy's transformer with a scalar head, and the handle that trains it.

    critic.values(rollout)                                  # [N, Lc] V(s_t), no gradients
    critic.update(rollout, old_values, returns, mask)       # one AdamW step on the clipped value loss

A second model, its gradients and its AdamW state: the memory GRPO saves (DeepSeekMath §4.1).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from rlvr.config.sections import REPLICATED, PPOConfig
from rlvr.distributed.parallel import Trained
from rlvr.distributed.world import World
from rlvr.logprobs import predicting_hidden
from rlvr.models.adapters import decoder
from rlvr.models.devices import autocast
from rlvr.ppo.gae import value_loss
from rlvr.records import Rollout
from rlvr.rl.batch import micro_batches


class ValueModel(torch.nn.Module):
    """V(s_t): the policy's transformer (a copy) with a linear head, read where each completion token is predicted."""

    def __init__(self, policy: torch.nn.Module):
        super().__init__()
        self.backbone = copy.deepcopy(decoder(policy))  # with LoRA: the adapted backbone, its own adapters train
        config: Any = policy.config  # (a transformers PretrainedConfig)
        self.head = torch.nn.Linear(config.hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                completion_mask: torch.Tensor) -> torch.Tensor:
        """Values [m, Lc] in fp32 on the CPU, whatever device and precision the critic runs in."""
        device = self.head.weight.device
        args = [t.to(device) for t in (prompt_ids, prompt_mask, completion_ids, completion_mask)]
        hidden = predicting_hidden(self.backbone, *args)
        values: torch.Tensor = (self.head(hidden).squeeze(-1) * args[3]).float().cpu()  # [m, Lc]
        return values


class Critic:
    """The critic as the step runs it: its network (rlvr.distributed.parallel.Trained) under the policy's precision
    (autocast, as rlvr.run.policy.Policy), its AdamW at the constant rate `ppo.critic_lr`, its update clipped
    around the old values (`ppo.value_clip`) and its gradient norm to `ppo.critic_max_grad_norm`."""

    def __init__(self, policy: torch.nn.Module, settings: PPOConfig, world: World, device: torch.device,
                 dtype: torch.dtype, micro_batch_tokens: int, no_grad_tokens: int) -> None:
        self.settings, self.device, self.dtype = settings, device, dtype
        self.tokens = micro_batch_tokens, no_grad_tokens  # (with and without gradients)
        self.trained = Trained(ValueModel(policy).to(device), world, REPLICATED, device, dtype)
        self.module = self.trained.module
        self.optimizer = torch.optim.AdamW(self.module.parameters(), lr=settings.critic_lr)

    def __call__(self, *rows: torch.Tensor) -> torch.Tensor:
        """V(s_t) [m, Lc] of micro-batch rows (prompt ids, prompt mask, completion ids, completion mask)."""
        with autocast(self.device, self.dtype):
            return self.trained(*rows)  # type: ignore[no-any-return]

    @torch.no_grad()
    def values(self, rollout: Rollout) -> torch.Tensor:
        """V(s_t) of every completion token, [N, Lc] (0 past a completion's end)."""
        out = torch.zeros(rollout.completion_ids.shape)
        for mb in micro_batches(rollout, rollout.completion_mask, self.tokens[1], share_prompt=False):
            v = self(mb.prompt_ids[mb.row_prompt], mb.prompt_mask[mb.row_prompt], mb.completion_ids,
                     mb.completion_mask)
            out[mb.rows, : v.shape[1]] = v
        return out

    def update(self, rollout: Rollout, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
        """One AdamW step on the clipped value loss ½·max((V − R)², (V_clip − R)²) (rlvr.ppo.gae.value_loss), token
        mean over the `mask`ed tokens (the completions that have a reward); returns the loss."""
        tokens = float(mask.sum().clamp(min=1))
        total = 0.0
        self.optimizer.zero_grad(set_to_none=True)
        runs = micro_batches(rollout, mask, self.tokens[0], share_prompt=False)
        for i, mb in enumerate(runs):
            lc = mb.completion_ids.shape[1]
            v = self(mb.prompt_ids[mb.row_prompt], mb.prompt_mask[mb.row_prompt], mb.completion_ids,
                     mb.completion_mask)
            loss = value_loss(v, old_values[mb.rows, :lc], returns[mb.rows, :lc], mb.loss_mask,
                              self.settings.value_clip, tokens)
            with self.trained.accumulating(last=i == len(runs) - 1):
                loss.backward()  # type: ignore[no-untyped-call]
            total += float(loss.detach())
        self.trained.optimizer_step(self.optimizer, None, max_grad_norm=self.settings.critic_max_grad_norm)
        return total

    def state_dict(self) -> dict[str, Any]:
        return {"critic": self.module.state_dict(), "critic_optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.module.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["critic_optimizer"])
