"""Tinker's built-in losses, on rlvr's objectives: each a sum over a datum's tokens (Tinker's convention: no mean;
the client weighs tokens through its inputs), of the per-token loss rlvr trains GRPO with.

    cross_entropy        −Σ w · log π(y)                        inputs: target_tokens, weights
    importance_sampling  −Σ ρ · A,  ρ = π(y) / q(y)              inputs: target_tokens, logprobs (q), advantages
    ppo                  −Σ min(ρ A, clip(ρ, lo, hi) A)          (rlvr.losses.clipped_policy_loss; inputs as above)
    cispo                −Σ sg(clip(ρ, lo, hi)) · A · log π(y)   (rlvr.losses.cispo_policy_loss)
    gspo                 −Σ min(s_t A, clip(s_t, lo, hi) A)      (rlvr.losses.gspo_policy_loss, GSPO-token: s_t has the
                         value of the sequence's ratio s = exp(mean log ρ over the tokens sequence_ratio_mask marks)
                         and the gradient of the token's own log π; inputs as above and sequence_ratio_mask)
    dro                  −Σ (log π(y) · A − β/2 · (log π(y) − log q(y))²)

`lo`, `hi` are bounds on the ratio itself (loss_fn_config clip_low_threshold, clip_high_threshold: 0.8 and 1.2
unless given), as Tinker takes them; rlvr's ε_low = 1 − lo, ε_high = hi − 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from rlvr.losses import cispo_policy_loss, clipped_policy_loss, gspo_policy_loss
from rlvr.tinker.wire import Datum, WireError

POLICY_INPUTS = ("target_tokens", "logprobs", "advantages")
INPUTS = {"cross_entropy": ("target_tokens", "weights"), "importance_sampling": POLICY_INPUTS, "ppo": POLICY_INPUTS,
          "cispo": POLICY_INPUTS, "gspo": (*POLICY_INPUTS, "sequence_ratio_mask"), "dro": POLICY_INPUTS}
Loss = Callable[[torch.Tensor, dict[str, torch.Tensor], dict[str, float]], torch.Tensor]


def check_inputs(loss_fn: str, datum: Datum) -> None:
    """A WireError naming what `datum` lacks for `loss_fn`, or what does not fit its tokens."""
    if loss_fn not in INPUTS:
        raise WireError(f"loss_fn {loss_fn!r} is not served: choose from {', '.join(INPUTS)} (or "
                        "forward_backward_custom, which the SDK runs on cross_entropy)")
    for name in INPUTS[loss_fn]:
        if name not in datum.inputs:
            raise WireError(f"loss_fn {loss_fn} needs loss_fn_inputs {', '.join(INPUTS[loss_fn])}: {name} is missing")
        if datum.inputs[name].shape != (len(datum.tokens),):
            raise WireError(f"loss_fn_inputs[{name!r}] has shape {list(datum.inputs[name].shape)}: one value per "
                            f"input token ({len(datum.tokens)})")


def token_losses(loss_fn: str, logprobs: torch.Tensor, inputs: dict[str, torch.Tensor],
                 config: dict[str, float]) -> torch.Tensor:
    """[T] the per-token loss of one datum under `loss_fn`, from its target tokens' log-probs [T]."""
    return LOSSES[loss_fn](logprobs, inputs, config)


def _cross_entropy(logprobs: torch.Tensor, inputs: dict[str, torch.Tensor], config: dict[str, float]) -> torch.Tensor:
    return -inputs["weights"].to(logprobs.dtype) * logprobs


def _bounds(config: dict[str, float]) -> tuple[float, float]:
    """rlvr's (ε_low, ε_high) from Tinker's bounds on the ratio."""
    return 1.0 - config.get("clip_low_threshold", 0.8), config.get("clip_high_threshold", 1.2) - 1.0


def _policy(objective: Callable[..., torch.Tensor], clipped: bool) -> Loss:
    def loss(logprobs: torch.Tensor, inputs: dict[str, torch.Tensor], config: dict[str, float]) -> torch.Tensor:
        clip_low, clip_high = _bounds(config) if clipped else (1.0, math.inf)
        q, advantages = inputs["logprobs"].to(logprobs.dtype), inputs["advantages"].to(logprobs.dtype)
        return objective(logprobs[None], q[None], advantages[None], clip_low, clip_high)[0]
    return loss


def _gspo(logprobs: torch.Tensor, inputs: dict[str, torch.Tensor], config: dict[str, float]) -> torch.Tensor:
    in_ratio = inputs["sequence_ratio_mask"] != 0
    if not in_ratio.any():
        raise WireError("loss_fn gspo takes the sequence's ratio over the tokens sequence_ratio_mask marks: it marks "
                        "none (1 on the sampled tokens)")
    q, advantages = inputs["logprobs"].to(logprobs.dtype), inputs["advantages"].to(logprobs.dtype)
    return gspo_policy_loss(logprobs[None], q[None], advantages[None], in_ratio[None], *_bounds(config))[0]


def _dro(logprobs: torch.Tensor, inputs: dict[str, torch.Tensor], config: dict[str, float]) -> torch.Tensor:
    if "beta" not in config:
        raise WireError("loss_fn dro needs loss_fn_config beta")
    q, advantages = inputs["logprobs"].to(logprobs.dtype), inputs["advantages"].to(logprobs.dtype)
    return -(logprobs * advantages - 0.5 * config["beta"] * (logprobs - q) ** 2)


LOSSES: dict[str, Loss] = {"cross_entropy": _cross_entropy, "importance_sampling": _policy(clipped_policy_loss, False),
                           "ppo": _policy(clipped_policy_loss, True), "cispo": _policy(cispo_policy_loss, True),
                           "gspo": _gspo, "dro": _dro}
