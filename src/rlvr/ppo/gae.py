"""Generalised advantage estimation (Schulman et al. 2016) over completion tokens, and PPO's token rewards.

    token rewards [N, Lc], values [N, Lc], mask [N, Lc] -> advantages [N, Lc], returns [N, Lc]
    ppo_advantages: rewards [N] ─token_rewards─▶ [N, Lc] ─gae─▶ advantages, returns ─whiten─▶ what PPO trains on
    value_loss: the critic's clipped loss against the returns

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


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
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


def ppo_advantages(rewards: torch.Tensor, sampling_logprobs: torch.Tensor, ref_logprobs: torch.Tensor | None,
                   values: torch.Tensor, mask: torch.Tensor, *, beta: float, gamma: float,
                   lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages the policy trains on, returns the critic trains towards), [N, Lc]: PPO's step from the [N]
    sequence rewards (InstructGPT's token rewards: the reward at the end, −β·(log π_old − log π_ref) on every
    token, log π_old being the sampler's), GAE against the critic's values V(s_t), whitened over the trained tokens.

    >>> m = torch.tensor([[True, True], [True, False]])
    >>> a, ret = ppo_advantages(torch.tensor([1.0, 0.0]), torch.zeros(2, 2), None, torch.zeros(2, 2), m, beta=0.0,
    ...                         gamma=1.0, lam=1.0)
    >>> [round(x, 4) for x in a[m].tolist()], ret.tolist()
    ([0.7071, 0.7071, -1.4142], [[1.0, 1.0], [0.0, 0.0]])
    """
    per_token = token_rewards(rewards, sampling_logprobs, ref_logprobs, mask, beta)
    advantages, returns = gae(per_token, values, mask, gamma, lam)
    return whiten(advantages, mask), returns


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               clip: float, tokens: float) -> torch.Tensor:
    """The critic's clipped loss ½·max((V − R)², (V_clip − R)²), V_clip = V_old + clip(V − V_old, ±clip), summed
    over the `mask`ed tokens and divided by `tokens` (the batch's count, so micro-batches add up).

    >>> v, old, ret, m = torch.tensor([[2.0]]), torch.tensor([[0.0]]), torch.tensor([[1.0]]), torch.tensor([[True]])
    >>> value_loss(v, old, ret, m, clip=0.5, tokens=1.0).item()  # max(½·1², ½·0.5²)
    0.5
    """
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    return (0.5 * torch.maximum((values - returns) ** 2, (clipped - returns) ** 2) * mask).sum() / tokens
