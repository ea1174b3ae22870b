"""Counter-based random numbers: one seed per completion, one uniform per (seed, token drawn).

A completion's random numbers depend on its own seed and on how many tokens it has drawn, nothing else:
not on which rank samples it, which rows share its batch, or the order the engine visits them. So the
same run samples the same completions on 1 or 8 ranks, with any batch composition, wherever the logits
agree. The stream is SplitMix64's (Steele, Lea & Flood 2014, the generator Java's SplittableRandom uses):
each uniform is the 64-bit finaliser of seed + (counter + 1)·γ, which passes BigCrush for sequential
counters; a seed is the same finaliser chained over its parts, e.g. (run seed, step, round, prompt slot,
sample index).

>>> seed = seed_of(0, 1, 0, 3, 5)
>>> u = uniforms([seed, seed_of(0, 1, 0, 3, 6)], 0)
>>> u.shape, bool(((0 <= u) & (u < 1)).all())
(torch.Size([2]), True)
>>> bool(uniforms([seed], 0) == u[0]) and bool(uniforms([seed], 1) != u[0])
True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np
import torch

_GAMMA = np.uint64(0x9E3779B97F4A7C15)  # the golden ratio's 64-bit odd integer (SplitMix64's increment)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_SEED_BITS = 63  # seeds fit a signed 64-bit integer (torch tensors, JSON)


def _finalise(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on uint64 values (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def seed_of(*parts: int) -> int:
    """One seed from integer parts, e.g. (run seed, step, sampling round, prompt slot, sample index): each part
    mixed into the last, so that no two tuples of the same length are likely to share a seed.

    >>> seed_of(0, 1) != seed_of(1, 0) and seed_of(0, 1) == seed_of(0, 1)
    True
    """
    with np.errstate(over="ignore"):
        z = np.zeros(1, dtype=np.uint64)
        for part in parts:
            z = _finalise(z + _GAMMA + np.uint64(part % 2**64))
    return int(z[0] >> np.uint64(64 - _SEED_BITS))


def ids_hash(ids: Sequence[int]) -> int:
    """A 64-bit hash of token ids, for a seed part that depends on a prompt (the same ids, the same part, in any
    process).

    >>> ids_hash([1, 2]) == ids_hash([1, 2]) != ids_hash([2, 1])
    True
    """
    return int.from_bytes(hashlib.blake2b(json.dumps(list(ids)).encode(), digest_size=8).digest(), "little")


def seeds_for(run_seed: int, step: int, round_: int, slot: int, samples: int) -> list[int]:
    """The seeds of the `samples` completions of the prompt at `slot` of a step's batch (its position in the
    step's whole batch, whichever rank samples it), in sampling round `round_` (dynamic sampling refills)."""
    return [seed_of(run_seed, step, round_, slot, j) for j in range(samples)]


def uniforms(seeds: Sequence[int] | np.ndarray, counter: int | Sequence[int] | np.ndarray) -> torch.Tensor:
    """[B] float64 uniforms in [0, 1): draw number `counter` (one for all, or one per row) of each seed's stream."""
    s = np.asarray(seeds, dtype=np.int64).astype(np.uint64)
    c = np.broadcast_to(np.asarray(counter, dtype=np.int64), s.shape).astype(np.uint64)
    with np.errstate(over="ignore"):
        z = _finalise(s + (c + np.uint64(1)) * _GAMMA)
    return torch.from_numpy((z >> np.uint64(11)).astype(np.float64) * 2.0**-53)
