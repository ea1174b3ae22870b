"""The policy-gradient term and the advantages a config names: rlvr's own (rlvr.losses, rlvr.advantages)
or the user's own function (`algorithm.policy_loss` / `algorithm.advantage_fn` = `file.py:function`).

A user's policy loss:  fn(logprobs, old_logprobs, advantages, mask) -> per-token loss, all [N, T]
    (log π_θ with gradients, log π_old, per-token advantages, the trained tokens; the loss is minimised,
    aggregated like the built-in ones, and β·KL is added to it).
A user's advantages:   fn(rewards, components) -> advantages [P, G]
    (rewards [P, G], NaN where a completion could not be scored; components: each reward's own [P, G]).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch

from rlvr.config import AlgorithmConfig
from rlvr.deadline import call_user
from rlvr.errors import UserError
from rlvr.losses import (
    cispo_policy_loss,
    clip_fractions,
    clipped_policy_loss,
    gspo_policy_loss,
    sapo_policy_loss,
    sequence_log_ratio,
)
from rlvr.user_code import load_user_object


def policy_term(algo: AlgorithmConfig, logprobs: torch.Tensor, old_logprobs: torch.Tensor,
                advantages: torch.Tensor, mask: torch.Tensor, sequences: Sequences = None) -> torch.Tensor:
    """The per-token policy-gradient loss [N, T] that `algo.policy_loss` names (POLICY_LOSSES, or yours);
    `sequences` [N]: each row's sequence, where one spans several rows (GSPO's ratio is a sequence's)."""
    name = algo.policy_loss
    if name in POLICY_LOSSES:
        return POLICY_LOSSES[name].loss(algo, logprobs, old_logprobs, advantages, mask, sequences)
    # (copies: an in-place edit of the user's cannot reach the KL term or the metrics; the clone of `logprobs`
    # passes its gradient through)
    loss = _call(name, "algorithm.policy_loss", algo.timeout_s, user_function(name, "policy loss"),
                 logprobs.clone(), old_logprobs.clone(), advantages.clone(), mask.clone())
    _check(loss, tuple(logprobs.shape), name, "algorithm.policy_loss", "the per-token loss [N, T]")
    if not loss.requires_grad:
        raise UserError(f"algorithm.policy_loss {name!r} returned a loss without gradients: compute it from "
                        "`logprobs` (do not detach it)")
    return cast(torch.Tensor, loss)


def clip_shares(algo: AlgorithmConfig, logprobs: torch.Tensor, old_logprobs: torch.Tensor,
                advantages: torch.Tensor, mask: torch.Tensor, sequences: Sequences = None) -> tuple[float, float]:
    """The shares of trained tokens the objective's bound acted on, (below, above) (POLICY_LOSSES; your own
    loss: (0, 0))."""
    entry = POLICY_LOSSES.get(algo.policy_loss)
    if entry is None:
        return 0.0, 0.0
    return entry.clipped(algo, logprobs.detach(), old_logprobs.detach(), advantages, mask, sequences)


Sequences = torch.Tensor | None  # [N] each row's sequence where one spans several rows (rlvr.harness); None: rows


@dataclass(frozen=True)
class PolicyLoss:
    """A built-in policy-gradient term: its per-token loss [N, T], and the shares of trained tokens its bound acted
    on, (below, above), as logged (clip_low_fraction, clip_high_fraction)."""

    loss: Callable[[AlgorithmConfig, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Sequences],
                   torch.Tensor]
    clipped: Callable[[AlgorithmConfig, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Sequences],
                      tuple[float, float]]


def _token_clips(algo: AlgorithmConfig, logprobs: torch.Tensor, old: torch.Tensor, advantages: torch.Tensor,
                 mask: torch.Tensor, sequences: Sequences) -> tuple[float, float]:
    """clip: the tokens whose gradient the clip removed."""
    return clip_fractions(logprobs, old, advantages, mask, algo.clip_low, algo.clip_high)


def _sequence_clips(algo: AlgorithmConfig, logprobs: torch.Tensor, old: torch.Tensor, advantages: torch.Tensor,
                    mask: torch.Tensor, sequences: Sequences) -> tuple[float, float]:
    """gspo: the tokens of sequences whose ratio s_i it clipped (the sequence's ratio on each of its tokens)."""
    mean = sequence_log_ratio(logprobs, old, mask, sequences)
    return clip_fractions(mean.expand_as(logprobs), torch.zeros_like(logprobs), advantages, mask, algo.clip_low,
                          algo.clip_high)


def _weight_clips(algo: AlgorithmConfig, logprobs: torch.Tensor, old: torch.Tensor, advantages: torch.Tensor,
                  mask: torch.Tensor, sequences: Sequences) -> tuple[float, float]:
    """cispo: the tokens whose weight it truncated (bounded whatever the advantage's sign)."""
    ones = torch.ones_like(logprobs)
    low, _ = clip_fractions(logprobs, old, -ones, mask, algo.clip_low, algo.clip_high)
    _, high = clip_fractions(logprobs, old, ones, mask, algo.clip_low, algo.clip_high)
    return low, high


def _no_clips(algo: AlgorithmConfig, logprobs: torch.Tensor, old: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, sequences: Sequences) -> tuple[float, float]:
    """sapo: a soft gate, no bound."""
    return 0.0, 0.0


# The one table from a name (algorithm.policy_loss; rlvr.config.choices.POLICY_LOSSES) to its loss and its clip
# statistics; the formulas are rlvr.losses' pure functions.
POLICY_LOSSES: dict[str, PolicyLoss] = {
    "clip": PolicyLoss(lambda a, lp, old, adv, m, s: clipped_policy_loss(lp, old, adv, a.clip_low, a.clip_high),
                       _token_clips),
    "gspo": PolicyLoss(lambda a, lp, old, adv, m, s: gspo_policy_loss(lp, old, adv, m, a.clip_low, a.clip_high, s),
                       _sequence_clips),
    "cispo": PolicyLoss(lambda a, lp, old, adv, m, s: cispo_policy_loss(lp, old, adv, a.clip_low, a.clip_high),
                        _weight_clips),
    "sapo": PolicyLoss(lambda a, lp, old, adv, m, s: sapo_policy_loss(lp, old, adv, a.sapo_tau_pos, a.sapo_tau_neg),
                       _no_clips),
}


def user_advantages(spec: str, rewards: torch.Tensor, components: dict[str, torch.Tensor],
                    timeout_s: float) -> torch.Tensor:
    """The advantages [P, G] of the user's function `spec` (called within `timeout_s`; 0: no limit), checked."""
    out = _call(spec, "algorithm.advantage_fn", timeout_s, user_function(spec, "advantage function"), rewards.clone(),
                {k: v.clone() for k, v in components.items()})
    _check(out, tuple(rewards.shape), spec, "algorithm.advantage_fn", "advantages [P, G] like the rewards")
    return cast(torch.Tensor, out.to(rewards.dtype))


def user_function(spec: str, kind: str) -> Callable[..., Any]:
    """The user's function (its file is imported once: rlvr.user_code keeps the module, and with it its state)."""
    return load_user_object(spec, kind, "function", "a function (docs/objectives.md has its signature)")  # type: ignore[no-any-return]


def _call(spec: str, setting: str, seconds: float, fn: Callable[..., Any], *args: Any) -> Any:
    """The user's function under the contract of every user function (rlvr.deadline.call_user); its exception
    is one line naming it, not our traceback."""
    try:
        return call_user(f"{setting} {spec!r}", lambda: fn(*args), seconds, "algorithm.timeout_s",
                         "return the tensor, or raise an exception for a bug")
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"{setting} {spec!r} raised {type(e).__name__}: {e} (fix the function)") from None


def _check(out: Any, shape: tuple[int, ...], spec: str, setting: str, what: str) -> None:
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != shape:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise UserError(f"{setting} {spec!r} returned {got}, not {what} of shape {shape}")
    if out.is_meta:
        raise UserError(f"{setting} {spec!r} returned a tensor on the meta device (a shape without values): "
                        "compute it from the tensors it is given")
    if not bool(torch.isfinite(out).all()):
        raise UserError(f"{setting} {spec!r} returned NaN or infinite values: return finite numbers "
                        "(an unscored completion's reward is NaN: give it 0)")
