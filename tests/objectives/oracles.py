"""The gradients each objective's paper states, written from the formulas, with plain Python for the
advantages and the toy policy's closed-form scores (toy.scores) — no rlvr code. The loss is minimised, so
the gradient of the loss is minus the objective's."""

from __future__ import annotations

import math

import torch

from .toy import F64, LENGTHS, MASK, PREFIXES, scores, token_logprobs


def advantages(r: list[float], baseline: str = "group_mean", scale: str = "group_std", unbiased: bool = False,
               eps: float = 1e-4) -> list[float]:
    """One group's advantages: (r − baseline)/(std + ε), over its scored completions (NaN: unscored, 0)."""
    kept = [i for i, x in enumerate(r) if not math.isnan(x)]
    out = [0.0] * len(r)
    values = [r[i] for i in kept]
    if len(values) < 2 or max(values) == min(values):
        return out
    n, total = len(values), sum(values)
    mean = total / n
    std = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1 if unbiased else n))
    centred = {i: r[i] - (mean if baseline == "group_mean" else (total - r[i]) / (n - 1)) for i in kept}
    if scale in ("group_std", "batch_std"):
        centred = {i: c / (std + eps) for i, c in centred.items()}
    elif scale == "batch_norm":
        centred = normalised(centred, eps)
    for i, c in centred.items():
        out[i] = c
    return out


def normalised(values: dict[int, float], eps: float) -> dict[int, float]:
    n = len(values)
    mean = sum(values.values()) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values.values()) / n)
    return {i: (v - mean) / (std + eps) for i, v in values.items()}


def gdpo(components: list[list[float]], weights: list[float], eps: float) -> list[float]:
    """GDPO: each reward normalised within the group, the weighted sum normalised over the batch (the group)."""
    g = len(components[0])
    total = [sum(w * a for w, a in zip(weights, column))
             for column in zip(*[advantages(c, eps=eps) for c in components])]
    if all(x == 0 for x in total):
        return total
    return [normalised(dict(enumerate(total)), eps)[i] for i in range(g)]


def aggregation_weights(aggregation: str, members: torch.Tensor, kept: torch.Tensor, constant: float) -> torch.Tensor:
    """[G, T]: how much each token's term counts in the aggregated loss."""
    mask = MASK[members] & kept[:, None]
    n_seq = max(1, int(kept.sum()))
    if aggregation == "sequence_mean":
        w = 1.0 / (n_seq * LENGTHS[members].to(F64))[:, None].expand(-1, mask.shape[1])
    elif aggregation == "token_mean":
        w = torch.full(mask.shape, 1.0 / max(1, int(mask.sum())), dtype=F64)
    else:
        w = torch.full(mask.shape, 1.0 / (n_seq * constant), dtype=F64)
    return torch.where(mask, w, 0.0)


def policy_gradient(kind: str, theta: torch.Tensor, theta_old: torch.Tensor, members: torch.Tensor,
                    adv: torch.Tensor, weights: torch.Tensor, *, eps_low: float = 0.2, eps_high: float = 0.2,
                    tau_pos: float = 1.0, tau_neg: float = 1.05) -> torch.Tensor:
    """The gradient of one group's loss [3, 3] as each paper states it, at θ, the group drawn from π_old.
    adv [G, T] per token; weights [G, T] the aggregation's (0 where not trained)."""
    theta, theta_old = theta.detach(), theta_old.detach()
    rho = (token_logprobs(theta) - token_logprobs(theta_old)).exp()[members]
    if kind == "clip":  # PPO: ρÂ∇log π where the min picks the unclipped term, else 0
        live = ~(((adv > 0) & (rho > 1 + eps_high)) | ((adv < 0) & (rho < 1 - eps_low)))
        coef = rho * adv * live
    elif kind == "gspo":  # s_i = exp(mean_t log ρ): s_i Â_i ∇(1/|y_i| Σ_t log π), the sequence clipped
        mask = MASK[members]
        s = (torch.where(mask, rho.log(), 0.0).sum(-1) / LENGTHS[members]).exp()[:, None].expand_as(rho)
        live = ~(((adv > 0) & (s > 1 + eps_high)) | ((adv < 0) & (s < 1 - eps_low)))
        coef = s * adv * live
    elif kind == "cispo":  # sg(clip(ρ)) Â ∇log π, every token
        coef = rho.clamp(1 - eps_low, 1 + eps_high) * adv
    elif kind == "sapo":  # ∇[σ(τ(ρ−1))·4/τ] Â = 4σ(1−σ) ρ Â ∇log π
        tau = torch.where(adv > 0, tau_pos, tau_neg).to(F64)
        sig = torch.sigmoid(tau * (rho - 1))
        coef = 4 * sig * (1 - sig) * rho * adv
    else:
        raise ValueError(kind)
    return -((weights * coef)[..., None, None] * scores(theta)[members]).sum((0, 1))


def kl_gradient(theta: torch.Tensor, theta_ref: torch.Tensor, reverse: bool = False) -> torch.Tensor:
    """[3 prefixes, 3, 3]: ∇_θ KL(π_θ(·|p) ‖ π_ref(·|p)) at each prefix p (KL(π_ref ‖ π_θ) when `reverse`), from
    the closed-form KL of the three-way softmax."""
    out = torch.zeros(len(PREFIXES), *theta.shape, dtype=F64)
    for p in range(len(PREFIXES)):
        t = theta.detach().clone().requires_grad_(True)
        logp, logq = torch.log_softmax(t[p], -1), torch.log_softmax(theta_ref[p].detach(), -1)
        kl = (logq.exp() * (logq - logp)).sum() if reverse else (logp.exp() * (logp - logq)).sum()
        (out[p],) = torch.autograd.grad(kl, t)
    return out


def expected_reward_gradient(theta: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    """∇_θ J, J = Σ_y π_θ(y) r(y): the true policy gradient, by enumeration."""
    t = theta.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad((token_logprobs(t).sum(-1).exp() * reward).sum(), t)
    return grad
