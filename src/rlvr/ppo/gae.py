"""Generalised advantage estimation (Schulman et al. 2016) over completion tokens, and PPO's token rewards.

    token rewards [N, Lc], values [N, Lc], mask [N, Lc] -> advantages [N, Lc], returns [N, Lc]

In RLHF-style PPO (InstructGPT, DeepSeekMath Eq. 2's baseline) the verifier's reward arrives at the
completion's last token and every token pays a KL penalty to the reference: r_t = −β·(log π_old − log π_ref),
plus the reward at the end. The critic V(s_t) is trained towards the returns.
"""

from __future__ import annotations

import torch


def token_rewards(rewards: torch.Tensor, logprobs: torch.Tensor, ref_logprobs: torch.Tensor | None,
                  mask: torch.Tensor, beta: float) -> torch.Tensor:
    """[N] sequence rewards -> [N, Lc] per-token rewards: the KL penalty on every token, the reward on the last.

    >>> m = torch.tensor([[True, True, False]])
    >>> token_rewards(torch.tensor([1.0]), torch.zeros(1, 3), None, m, beta=0.1).tolist()
    [[0.0, 1.0, 0.0]]
    """
    out = torch.zeros(mask.shape)
    if ref_logprobs is not None and beta > 0:
        out -= beta * (logprobs - ref_logprobs) * mask
    last = mask.long().sum(-1) - 1
    rows = (last >= 0).nonzero().squeeze(-1)
    out[rows, last[rows]] += rewards[rows]
    return out


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns) [N, Lc]: A_t = Σ_k (γλ)^k δ_{t+k}, δ_t = r_t + γ V_{t+1} − V_t, V after the end = 0.

    >>> r, v, m = torch.tensor([[0.0, 1.0]]), torch.tensor([[0.5, 0.5]]), torch.tensor([[True, True]])
    >>> a, ret = gae(r, v, m, gamma=1.0, lam=1.0)
    >>> a.tolist(), ret.tolist()
    ([[0.5, 0.5]], [[1.0, 1.0]])
    """
    values = values * mask
    advantages = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        next_value = values[:, t + 1] if t + 1 < rewards.shape[1] else torch.zeros(rewards.shape[0])
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = (delta + gamma * lam * running) * mask[:, t]
        advantages[:, t] = running
    return advantages, (advantages + values) * mask


def whiten(advantages: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Advantages normalised to mean 0, std 1 over the real tokens (padding stays 0).

    >>> whiten(torch.tensor([[1.0, 3.0, 9.0]]), torch.tensor([[True, True, False]])).tolist()
    [[-1.0, 1.0, 0.0]]
    """
    real = advantages[mask]
    return ((advantages - real.mean()) / (real.std(correction=0) + eps)) * mask
