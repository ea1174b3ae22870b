"""Signs of emerging reasoning, measured on completions (DeepSeek-R1's "aha moment", Guo et al. 2025, §2.2.4).

During training and evaluation: how long completions get (their distribution, not only the mean),
how often they reflect ("wait", "let me reconsider", ...; the list is configurable), how many have
the expected format, and how much the rewards within each group spread (a group whose completions
all score the same teaches nothing).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import torch

from rlvr.config import DEFAULT_REFLECTION_PHRASES


def reflects(text: str, phrases: Sequence[str]) -> bool:
    """Whether `text` contains one of `phrases` as whole words, ignoring case.

    >>> reflects("7. Wait, that is wrong.", ["wait"]), reflects("She awaits the bus.", ["wait"])
    (True, False)
    >>> reflects("Let me  verify: 3 + 4 = 7", ["let me verify"])
    True
    """
    for phrase in phrases:
        words = r"\s+".join(re.escape(w) for w in phrase.split())
        if words and re.search(rf"(?<!\w){words}(?!\w)", text, flags=re.IGNORECASE):
            return True
    return False


def reflection_rate(texts: Sequence[str], phrases: Sequence[str] = DEFAULT_REFLECTION_PHRASES) -> float:
    """Share of completions with at least one reflection phrase.

    >>> reflection_rate(["Wait, no.", "so 7", "Actually it is 8"])
    0.6666666666666666
    """
    return sum(reflects(t, phrases) for t in texts) / len(texts) if texts else 0.0


def length_quantiles(lengths: Sequence[int]) -> dict[str, float]:
    """The 10th, 50th and 90th percentiles of completion length in tokens (linear interpolation).

    >>> length_quantiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    {'p10': 2.0, 'p50': 6.0, 'p90': 10.0}
    """
    if not lengths:
        return {"p10": 0.0, "p50": 0.0, "p90": 0.0}
    q = torch.quantile(torch.tensor(lengths, dtype=torch.float64), torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64))
    return {"p10": float(q[0]), "p50": float(q[1]), "p90": float(q[2])}


def reward_spread(rewards: torch.Tensor) -> dict[str, float]:
    """Per-group spread of rewards [P, G], averaged over groups: population std and max − min.

    >>> reward_spread(torch.tensor([[0.0, 1.0], [1.0, 1.0], [float("nan"), 1.0]]))
    {'std_mean': 0.25, 'range_mean': 0.5, 'range_max': 1.0}

    Unscored completions (NaN) are left out, and groups with fewer than two scored ones.
    """
    rows = [row[~row.isnan()] for row in rewards]
    rows = [row for row in rows if row.numel() >= 2]
    if not rows:
        return {"std_mean": math.nan, "range_mean": math.nan, "range_max": math.nan}
    ranges = torch.stack([row.max() - row.min() for row in rows])
    stds = torch.stack([row.std(correction=0) for row in rows])
    return {"std_mean": float(stds.mean()), "range_mean": float(ranges.mean()), "range_max": float(ranges.max())}
