"""A toy autoregressive policy small enough to enumerate every completion, in float64.

Vocabulary {0 = end, 1, 2}, completions of at most 2 tokens: (0), (1, 0), (2, 0), (1, 1), (1, 2), (2, 1), (2, 2)
(the last four cut at the length limit). A tabular softmax policy: one logit vector per prefix
((), (1), (2)), so that ∇ log π of any token is known in closed form (e_a − π(·|prefix)), independently of
autograd. Groups of G completions are enumerated too (7^G of them), with their exact probabilities.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

F64 = torch.float64
SEQUENCES = [(0,), (1, 0), (2, 0), (1, 1), (1, 2), (2, 1), (2, 2)]
PREFIXES = [(), (1,), (2,)]
T = 2  # the longest completion


def _table() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    tokens = torch.zeros(len(SEQUENCES), T, dtype=torch.long)
    prefix = torch.zeros(len(SEQUENCES), T, dtype=torch.long)
    mask = torch.zeros(len(SEQUENCES), T, dtype=torch.bool)
    for s, seq in enumerate(SEQUENCES):
        for t, token in enumerate(seq):
            tokens[s, t], prefix[s, t], mask[s, t] = token, PREFIXES.index(seq[:t]), True
    return tokens, prefix, mask


TOKENS, PREFIX, MASK = _table()
LENGTHS = MASK.sum(-1)


def logits(seed: int, scale: float = 1.0) -> torch.Tensor:
    """A policy: [3 prefixes, 3 tokens] logits."""
    return (torch.randn(len(PREFIXES), 3, generator=torch.Generator().manual_seed(seed), dtype=F64) * scale)


def token_logprobs(theta: torch.Tensor) -> torch.Tensor:
    """[7 sequences, T] log π of each completion's tokens (0 past its end)."""
    lp = torch.log_softmax(theta, dim=-1)[PREFIX, TOKENS]
    return torch.where(MASK, lp, 0.0)


def sequence_probs(theta: torch.Tensor) -> torch.Tensor:
    return token_logprobs(theta).sum(-1).exp()


def scores(theta: torch.Tensor) -> torch.Tensor:
    """[7, T, 3, 3]: ∇_θ log π(token) at each position, in closed form: e_a − π(·|prefix) on the prefix's row."""
    probs = torch.softmax(theta, dim=-1)
    out = torch.zeros(len(SEQUENCES), T, len(PREFIXES), 3, dtype=F64)
    for s, seq in enumerate(SEQUENCES):
        for t, token in enumerate(seq):
            p = PREFIXES.index(seq[:t])
            out[s, t, p] = -probs[p]
            out[s, t, p, token] += 1.0
    return out


def visits(theta: torch.Tensor) -> torch.Tensor:
    """[3]: how often each prefix is a position of a completion drawn from π_θ, in expectation."""
    probs = torch.softmax(theta, dim=-1).detach()
    return torch.stack([torch.tensor(1.0, dtype=F64), probs[0, 1], probs[0, 2]])


@dataclass(frozen=True)
class Groups:
    """Every group of G completions: which completions [K, G], and its probability under π_old [K]."""

    members: torch.Tensor
    probability: torch.Tensor


def all_groups(theta_old: torch.Tensor, g: int) -> Groups:
    members = torch.tensor(list(itertools.product(range(len(SEQUENCES)), repeat=g)), dtype=torch.long)
    p = sequence_probs(theta_old.detach())
    return Groups(members, p[members].prod(-1))


def sampled_groups(theta_old: torch.Tensor, g: int, n: int, seed: int) -> torch.Tensor:
    """[n, G] completions drawn from π_old (Monte Carlo)."""
    p = sequence_probs(theta_old.detach())
    draws = torch.multinomial(p, n * g, replacement=True, generator=torch.Generator().manual_seed(seed))
    return draws.view(n, g)
