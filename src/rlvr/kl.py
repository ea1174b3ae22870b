"""Per-token estimators of KL(π_θ ‖ π_ref) from log-probabilities of the sampled tokens.

Named after Schulman's note "Approximating KL Divergence" (2020). With log r = log π_ref − log π_θ
evaluated at tokens sampled from π_θ:

- k1 = −log r              unbiased, high variance, can be negative per token
- k2 = ½ (log r)²          biased, low variance, ≥ 0
- k3 = r − log r − 1       unbiased, low variance, ≥ 0 — DeepSeekMath Eq. 4 (Shao et al. 2024)
- k3+ = ρ · k3             k3 with the importance ratio ρ = π_θ/π_old: the same value, and the gradient of
                           KL(π_θ ‖ π_ref) where k3's is that of KL(π_ref ‖ π_θ) (docs/objectives.md)

All take logprobs, ref_logprobs [N, T] and return [N, T]; masking is the caller's job.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.config.choices import KLEstimator

# exp() of a log-ratio beyond this overflows float32 well before it means anything: a token the
# policy gives 1e-9 of the reference's probability is already "infinitely far" for the leash.
_MAX_LOG_RATIO = 20.0


def k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """log π_θ − log π_ref.

    >>> k1(torch.tensor([[0.0]]), torch.tensor([[-1.0]])).item()
    1.0
    """
    return logprobs - ref_logprobs


def k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """½ (log π_θ − log π_ref)².

    >>> k2(torch.tensor([[0.0]]), torch.tensor([[-2.0]])).item()
    2.0
    """
    return 0.5 * (logprobs - ref_logprobs) ** 2


def k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """π_ref/π_θ − log(π_ref/π_θ) − 1, the DeepSeekMath estimator; zero iff the two agree.

    Worked numbers: π_θ = 0.6, π_ref = 0.4 gives 0.072; π_θ = 0.9, π_ref = 0.1 gives 1.308.

    >>> round(k3(torch.tensor([0.6]).log(), torch.tensor([0.4]).log()).item(), 3)
    0.072
    >>> round(k3(torch.tensor([0.9]).log(), torch.tensor([0.1]).log()).item(), 3)
    1.308
    """
    log_ratio = (ref_logprobs - logprobs).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return torch.exp(log_ratio) - log_ratio - 1.0


def k3_plus(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    """k3 weighted by the importance ratio ρ = π_θ/π_old, the ratio's gradient kept: "k3+" (verl; TRL's
    `use_bias_correction_kl`, OpenRLHF's unbiased KL gradient). k3 in a loss has an unbiased value but its
    gradient, E[(1 − π_ref/π_θ) ∇log π_θ], is that of KL(π_ref ‖ π_θ), the other direction; ρ·k3's is
    E[log(π_θ/π_ref) ∇log π_θ], that of KL(π_θ ‖ π_ref) at each position. Its value at ρ = 1 is k3's.

    >>> x = torch.tensor([0.6]).log(); round(k3_plus(x, torch.tensor([0.4]).log(), x).item(), 3)
    0.072
    """
    ratio = torch.exp((logprobs - old_logprobs).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    return ratio * k3(logprobs, ref_logprobs)


ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "k1": k1,
    "k2": k2,
    "k3": k3,
}


def kl_estimate(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: KLEstimator = "k3",
                old_logprobs: torch.Tensor | None = None) -> torch.Tensor:
    """Dispatch to k1/k2/k3/k3+ by name; [N, T] -> [N, T]. `old_logprobs` (log π_old, k3+'s ratio): the
    policy's own, detached, when None (μ = 1: the ratio is 1 in value)."""
    if estimator == "k3+":
        return k3_plus(logprobs, ref_logprobs, logprobs.detach() if old_logprobs is None else old_logprobs)
    try:
        fn = ESTIMATORS[estimator]
    except KeyError:
        raise ValueError(f"unknown KL estimator {estimator!r}; choose from {[*ESTIMATORS, 'k3+']}") from None
    return fn(logprobs, ref_logprobs)
