"""Rollout correction: importance weights for completions whose sampler's log-probs are not the trainer's.

An engine other than the trainer's forward (vLLM, other kernels, another precision) samples from a
distribution π_s close to, but not equal to, the trainer's π_old. The policy-gradient term of token t is then
weighted by w = π_old / π_s (Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL
Training"; Liu et al. 2025, "When Speed Kills Stability"):

- level ``token``: w_{i,t} = exp(log π_old(o_{i,t}) − log π_s(o_{i,t})), one weight per token;
- level ``sequence``: w_i = exp(Σ_t [log π_old(o_{i,t}) − log π_s(o_{i,t})]), the whole completion's
  importance ratio (a product over its tokens, not a geometric mean), on each of its tokens;
- mode ``truncate`` (TIS): min(w, C); mode ``mask`` (MIS): w where 1/C ≤ w ≤ C, else 0 (the token or the
  whole completion dropped from the policy-gradient term).

The KL term is not weighted. What is logged (`correction_stats`): the raw and corrected weights' mean and
max, the share truncated or masked, KL(π_s ‖ π_old) by the k3 estimator over the sampled tokens
(E_s[r − 1 − log r], r = π_old/π_s, non-negative sample by sample), and the normalised effective sample size
(Σw)² / (n·Σw²) of the raw weights (1 = every weight equal).
"""

from __future__ import annotations

import torch

from rlvr.config.choices import CorrectionLevel, CorrectionMode
from rlvr.losses import sequence_totals

_MAX_LOG_WEIGHT = 30.0  # exp(30) ≈ 1e13: a sequence weight beyond it is as good as infinite, and stays finite


def log_weights(old_logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, mask: torch.Tensor,
                level: CorrectionLevel, sequences: torch.Tensor | None = None) -> torch.Tensor:
    """[N, T] log w: per token, or every token of a row carrying its sequence's summed log-ratio (0 off the
    mask); a row is a sequence, unless `sequences` [N] says which each row belongs to (rlvr.harness).

    >>> old, s = torch.tensor([[-1.0, -2.0, 0.0]]), torch.tensor([[-1.5, -1.0, -9.0]])
    >>> m = torch.tensor([[True, True, False]])
    >>> log_weights(old, s, m, "token").tolist(), log_weights(old, s, m, "sequence").tolist()
    ([[0.5, -1.0, 0.0]], [[-0.5, -0.5, 0.0]])
    """
    zero = torch.zeros_like(old_logprobs)
    per_token = torch.where(mask, old_logprobs - sampler_logprobs, zero)
    if level == "token":
        return per_token
    if level == "sequence":
        summed = sequence_totals(per_token.sum(-1), sequences)  # (a trajectory split over rows: its rows' sum)
        return torch.where(mask, summed.unsqueeze(-1).expand_as(per_token), zero)
    raise ValueError(f"unknown rollout correction level {level!r}")


def corrected_weights(log_w: torch.Tensor, mask: torch.Tensor, mode: CorrectionMode, threshold: float) -> torch.Tensor:
    """[N, T] the weights applied to the policy-gradient term: min(w, C) (truncate) or w·1[1/C ≤ w ≤ C] (mask);
    0 off the mask.

    >>> log_w, m = torch.tensor([[0.0, 1.0, -1.0]]), torch.ones(1, 3, dtype=torch.bool)
    >>> [round(x, 4) for x in corrected_weights(log_w, m, "truncate", 2.0)[0].tolist()]
    [1.0, 2.0, 0.3679]
    >>> [round(x, 4) for x in corrected_weights(log_w, m, "mask", 2.0)[0].tolist()]
    [1.0, 0.0, 0.0]
    """
    w = log_w.clamp(max=_MAX_LOG_WEIGHT).exp()
    if mode == "truncate":
        kept = w.clamp(max=threshold)
    elif mode == "mask":
        kept = torch.where((w >= 1.0 / threshold) & (w <= threshold), w, torch.zeros_like(w))
    else:
        raise ValueError(f"unknown rollout correction mode {mode!r}")
    return torch.where(mask, kept, torch.zeros_like(kept))


# what correction_sums returns, before any token: "_max" keys are maxima, the others sums
NO_SUMS: dict[str, float] = dict.fromkeys(("n", "w", "w2", "w_max", "kept", "kept_max", "changed", "tokens", "k3"),
                                          0.0)


def correction_sums(old_logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, mask: torch.Tensor,
                    level: CorrectionLevel, corrected: torch.Tensor,
                    sequences: torch.Tensor | None = None) -> dict[str, float]:
    """What `correction_stats` needs, as sums and maxima that add up over micro-batches and ranks.

    Units are tokens at the token level and completions at the sequence level; the KL is over tokens either way.
    """
    log_w = log_weights(old_logprobs, sampler_logprobs, mask, level, sequences)
    if level == "sequence":  # one weight per completion that has tokens (a split trajectory's: its first row's)
        rows = mask.any(-1)
        if sequences is not None:
            seen: set[int] = set()
            for i, (q, has) in enumerate(zip(sequences.tolist(), rows.tolist())):
                rows[i] = has and q not in seen
                seen |= {q} if has else set()
        raw, kept = log_w[:, 0][rows].clamp(max=_MAX_LOG_WEIGHT).exp(), corrected.amax(-1)[rows]
        # (a masked completion's corrected weight is 0 on every token; a kept one's is the same on all)
    else:
        raw, kept = log_w[mask].clamp(max=_MAX_LOG_WEIGHT).exp(), corrected[mask]
    r = (old_logprobs - sampler_logprobs)[mask]  # log(π_old/π_s) of each sampled token
    k3 = (r.clamp(max=_MAX_LOG_WEIGHT).exp() - 1 - r).sum()
    changed = (kept != raw).sum()
    return {"n": float(raw.numel()), "w": float(raw.sum()), "w2": float((raw * raw).sum()),
            "w_max": float(raw.max()) if raw.numel() else 0.0, "kept": float(kept.sum()),
            "kept_max": float(kept.max()) if kept.numel() else 0.0, "changed": float(changed),
            "tokens": float(mask.sum()), "k3": float(k3)}


def correction_stats(sums: dict[str, float], mode: CorrectionMode) -> dict[str, float]:
    """The step's metrics from summed `correction_sums`.

    >>> s = {"n": 2.0, "w": 3.0, "w2": 5.0, "w_max": 2.0, "kept": 3.0, "kept_max": 2.0, "changed": 0.0,
    ...      "tokens": 2.0, "k3": 0.2}
    >>> correction_stats(s, "truncate")["rollout_correction/ess"]
    0.9
    """
    n = max(sums["n"], 1.0)
    cut = "truncated" if mode == "truncate" else "masked"
    return {
        "rollout_correction/ratio_mean": sums["w"] / n,
        "rollout_correction/ratio_max": sums["w_max"],
        "rollout_correction/corrected_mean": sums["kept"] / n,
        "rollout_correction/corrected_max": sums["kept_max"],
        f"rollout_correction/share_{cut}": sums["changed"] / n,
        "rollout_correction/ess": min(1.0, sums["w"] ** 2 / (n * sums["w2"])) if sums["w2"] > 0 else 1.0,
        "sampler/kl": sums["k3"] / max(sums["tokens"], 1.0),
    }
