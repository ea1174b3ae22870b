"""The policy objectives and how per-token losses become one number (DeepSeekMath Eq. 3).

Per token:  loss_{i,t} = −min(ρ_{i,t} Â_{i,t}, clip(ρ_{i,t}, 1 − ε_low, 1 + ε_high) Â_{i,t}) + β·KL_{i,t}
with ρ = exp(log π_θ − log π_old). Separate ε_low / ε_high allow DAPO's "clip-higher". Beside it (the
`algorithm.policy_loss` setting): GSPO's sequence-level ratio, CISPO's clipped stop-gradient weight, SAPO's
soft gate; docs/objectives.md has each formula and the test that proves it.

Aggregation is its own setting (DeepSeekMath, Dr. GRPO and DAPO differ only here):

- ``sequence_mean``: mean over tokens of each completion, then over completions — DeepSeekMath's
  1/G Σ_i 1/|o_i| Σ_t (DeepSeekMath Eq. 3). Long completions weigh less per token.
- ``token_mean``: sum over every token of the batch / number of tokens (DAPO).
- ``constant``: sum over every token / (number of completions × a constant, e.g. the maximum
  completion length) — Dr. GRPO's length-unbiased normaliser.
"""

from __future__ import annotations

import torch

from rlvr.config.choices import AGGREGATIONS, Aggregation


def _per_token(advantages: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Advantages [N] (one per completion) or [N, T] (per token) -> [N, T]."""
    if advantages.dim() == 1:
        return advantages.unsqueeze(-1).expand_as(like)
    return advantages


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
) -> torch.Tensor:
    """Per-token loss to minimise: the negated PPO/GRPO clipped surrogate. [N, T] -> [N, T].

    Worked numbers (ε = 0.2, ρ = 1.5): the objective is 1.2 for Â = +1 (clipped)
    and −1.5 for Â = −1 (the pessimistic min keeps the unclipped penalty); the loss is its negation.

    >>> old = torch.zeros(1, 2)
    >>> new = torch.full((1, 2), 1.5).log()
    >>> clipped_policy_loss(new, old, torch.tensor([1.0])).tolist()
    [[-1.2000000476837158, -1.2000000476837158]]
    >>> clipped_policy_loss(new, old, torch.tensor([-1.0]))[0, 0].item()
    1.5
    """
    ratio = torch.exp(logprobs - old_logprobs)
    adv = _per_token(advantages, ratio)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv
    return -torch.minimum(unclipped, clipped)


def sequence_log_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor,
                       sequences: torch.Tensor | None = None) -> torch.Tensor:
    """GSPO's log s_i = 1/|y_i| Σ_t log ρ_{i,t} over each sequence's trained tokens (a mean, never a sum), on each
    of its rows: a row is a sequence, unless `sequences` [N] says which sequence each row belongs to (an agent's
    trajectory split over rows: rlvr.harness). [N, T] -> [N, 1].

    >>> sequence_log_ratio(torch.tensor([[0.3, 0.1, 9.0]]), torch.zeros(1, 3), torch.tensor([[1, 1, 0]]).bool())
    tensor([[0.2000]])
    >>> one_sequence = torch.tensor([0, 0])  # (two rows of one sequence: their mean is its)
    >>> sequence_log_ratio(torch.tensor([[0.3], [0.1]]), torch.zeros(2, 1), torch.ones(2, 1).bool(), one_sequence)
    tensor([[0.2000],
            [0.2000]])
    """
    log_ratio = torch.where(mask, logprobs - old_logprobs, 0.0).sum(-1)
    tokens = mask.sum(-1).to(log_ratio.dtype)
    return (sequence_totals(log_ratio, sequences) / sequence_totals(tokens, sequences).clamp(min=1)).unsqueeze(-1)


def sequence_totals(row_values: torch.Tensor, sequences: torch.Tensor | None) -> torch.Tensor:
    """[N] each row's value summed over the rows of its sequence (`sequences` [N]: each row's, numbered from 0;
    None: every row its own sequence, the values as they are).

    >>> sequence_totals(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([0, 0, 1])).tolist()
    [3.0, 3.0, 4.0]
    """
    if sequences is None:
        return row_values
    size = int(sequences.max()) + 1 if sequences.numel() else 0
    return row_values.new_zeros(size).index_add(0, sequences, row_values)[sequences]


def gspo_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    sequences: torch.Tensor | None = None,
) -> torch.Tensor:
    """GSPO (Zheng et al. 2025, Eq. 7, the token form of Eq. 5): the sequence's importance ratio is the
    geometric mean of its token ratios, s_i = exp(1/|y_i| Σ_t log ρ_{i,t}) (a mean of log-ratios, never a
    sum), clipped per sequence. Per token s_{i,t} = sg(s_i) · π_θ(y_t)/sg(π_θ(y_t)): its value is s_i and its
    gradient s_i ∇log π_θ(y_t), so that with `sequence_mean` the gradient is GSPO's
    s_i Â_i · 1/|y_i| Σ_t ∇log π_θ(y_t); `sequences`: as in sequence_log_ratio. [N, T] -> [N, T].

    >>> old = torch.zeros(1, 2); new = torch.tensor([[0.2, -0.2]])  # log-ratios averaging 0: s = 1
    >>> gspo_policy_loss(new, old, torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool), 3e-4, 4e-4).tolist()
    [[-1.0, -1.0]]
    """
    mean = sequence_log_ratio(logprobs, old_logprobs, mask, sequences)
    ratio = torch.exp(mean.detach() + logprobs - logprobs.detach())
    adv = _per_token(advantages, ratio)
    return -torch.minimum(ratio * adv, ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv)


def cispo_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
) -> torch.Tensor:
    """CISPO (MiniMax-M1, 2025, Eq. 4): the importance weight clipped and its gradient stopped,
    −sg(clip(ρ, 1 − ε_low, 1 + ε_high)) · Â · log π_θ: every token keeps its gradient (no token is dropped
    by the clip, as in PPO), only its weight is bounded. [N, T] -> [N, T].

    >>> cispo_policy_loss(torch.tensor([[-1.0]]), torch.tensor([[-1.5]]), torch.tensor([2.0]), 1.0, 0.2).tolist()
    [[2.4000000953674316]]
    """
    weight = torch.exp(logprobs - old_logprobs).clamp(1.0 - clip_low, 1.0 + clip_high).detach()
    return -weight * _per_token(advantages, logprobs) * logprobs


def sapo_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    tau_pos: float,
    tau_neg: float,
) -> torch.Tensor:
    """SAPO (Gao et al. 2025, "Soft Adaptive Policy Optimization"): a soft gate instead of the hard clip,
    −f(ρ) Â with f(ρ) = σ(τ (ρ − 1)) · 4/τ, τ = τ_pos where Â > 0 and τ_neg where Â < 0. Its gradient is
    4 σ(1 − σ) · ρ Â ∇log π_θ: exactly the policy gradient at ρ = 1, fading smoothly as ρ leaves 1.
    [N, T] -> [N, T].

    >>> sapo_policy_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.tensor([1.0]), 1.0, 1.05).tolist()
    [[-2.0]]
    """
    ratio = torch.exp(logprobs - old_logprobs)
    adv = _per_token(advantages, ratio)
    tau = torch.where(adv > 0, tau_pos, tau_neg).to(ratio)
    return -torch.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau) * adv


def high_entropy_tokens(entropy: torch.Tensor, mask: torch.Tensor, share: float,
                        pool: torch.Tensor | None = None) -> torch.Tensor:
    """The tokens of `mask` [N, T] whose entropy is among the highest share ρ of the batch's (Wang et al. 2025,
    "Beyond the 80/20 Rule": the policy gradient on the forking tokens only): entropy ≥ the (1 − ρ) quantile
    of `pool` (every trained token's entropy, all ranks' when the batch is spread; `entropy[mask]` if None).

    >>> h = torch.tensor([[0.1, 2.0, 0.5], [1.0, 0.2, 0.0]]); m = torch.tensor([[1, 1, 1], [1, 1, 0]]).bool()
    >>> high_entropy_tokens(h, m, 0.4).int().tolist()
    [[0, 1, 0], [1, 0, 0]]
    """
    values = (entropy[mask] if pool is None else pool).double()
    if share >= 1.0 or values.numel() == 0:
        return mask.clone()
    threshold = torch.quantile(values, 1.0 - share)
    return mask & (entropy.double() >= threshold)


def clip_fractions(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
) -> tuple[float, float]:
    """Share of trained tokens whose gradient the clip removed: (below 1 − ε_low with Â < 0,
    above 1 + ε_high with Â > 0). Those are exactly the tokens where min() picks the clipped term."""
    with torch.no_grad():
        ratio = torch.exp(logprobs - old_logprobs)
        adv = _per_token(advantages, ratio)
        n = mask.sum().clamp(min=1)
        low = ((ratio < 1.0 - clip_low) & (adv < 0) & mask).sum() / n
        high = ((ratio > 1.0 + clip_high) & (adv > 0) & mask).sum() / n
    return low.item(), high.item()


def aggregate_loss(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: Aggregation = "sequence_mean",
    *,
    num_sequences: int | None = None,
    num_tokens: int | None = None,
    constant: float | None = None,
    row_tokens: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss [N, T] with its mask [N, T] to a scalar.

    `row_tokens` [N]: what each row's sum is divided by under sequence_mean, when a sequence spans several rows
    (a harness trajectory split where its agent rewrote its context: its trained tokens over all its rows, so it
    counts once, and `num_sequences` counts it once); by default each row's own trained tokens.

    `num_sequences` / `num_tokens` default to this tensor's own counts (rows with at least one
    trained token; rows masked out entirely do not count); a trainer that splits a
    batch into micro-batches passes the whole batch's counts so the micro-batch losses *sum* to
    the full-batch loss (gradient accumulation without reweighting).

    >>> loss = torch.tensor([[1., 1., 0.], [4., 0., 0.]]); m = torch.tensor([[1, 1, 0], [1, 0, 0]]).bool()
    >>> aggregate_loss(loss, m, "sequence_mean").item()   # (1 + 4) / 2
    2.5
    >>> aggregate_loss(loss, m, "token_mean").item()      # 6 / 3
    2.0
    >>> aggregate_loss(loss, m, "constant", constant=3).item()  # 6 / (2 × 3)
    1.0
    """
    masked = per_token * mask
    if num_sequences is None:
        num_sequences = int((mask.sum(-1) > 0).sum().clamp(min=1))
    if mode == "sequence_mean":
        per_sequence = masked.sum(-1) / (mask.sum(-1) if row_tokens is None else row_tokens).clamp(min=1)
        return per_sequence.sum() / num_sequences
    if mode == "token_mean":
        total = num_tokens if num_tokens is not None else int(mask.sum().clamp(min=1))
        return masked.sum() / total
    if mode == "constant":
        if constant is None or constant <= 0:
            raise ValueError("aggregation 'constant' needs a positive constant (e.g. max_new_tokens)")
        return masked.sum() / (num_sequences * constant)
    raise ValueError(f"unknown loss aggregation {mode!r}; choose from {AGGREGATIONS}")
