"""rlvr.seeds against SplitMix64 itself (Steele, Lea & Flood 2014): the reference outputs of its published
implementation, and the seed chain recomputed here with Python's integers."""

import pytest
import torch

from rlvr.seeds import ids_hash, seed_of, seeds_for, uniforms

MASK = 2**64 - 1
GAMMA = 0x9E3779B97F4A7C15
# SplitMix64's first five outputs from state 1234567 (Vigna's splitmix64.c, as the Rosetta Code task lists them)
REFERENCE = [6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431,
             16408922859458223821]


def finalise(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def test_the_stream_is_splitmix64s():
    """Draw c of seed s is SplitMix64's (c + 1)-th output from state s, its top 53 bits as a float in [0, 1)."""
    got = [uniforms([1234567], c).item() for c in range(5)]
    assert got == [(r >> 11) * 2.0**-53 for r in REFERENCE]
    assert [finalise((1234567 + (c + 1) * GAMMA) & MASK) for c in range(5)] == REFERENCE  # (the oracle's check)


def test_a_seed_is_the_finaliser_chained_over_its_parts():
    def chained(*parts):
        z = 0
        for part in parts:
            z = finalise((z + GAMMA + part % 2**64) & MASK)
        return z >> 1  # (63 bits: a signed 64-bit integer holds it)

    for parts in [(0,), (0, 1, 0, 3, 5), (7, 2**40, 1, 0, 63), (-1, 5)]:
        assert seed_of(*parts) == chained(*parts)
        assert 0 <= seed_of(*parts) < 2**63


def test_a_hash_of_token_ids_is_64_bits_all_used():
    """ids_hash is a seed part: an unsigned 64-bit value (seed_of takes each part modulo 2**64), its top bits used."""
    hashes = [ids_hash(list(range(i, i + 1 + i % 7))) for i in range(200)]
    assert all(0 <= h < 2**64 for h in hashes) and max(hashes) >= 2**63 and len(set(hashes)) == len(hashes)


def test_the_seeds_of_a_group_are_its_completions_own():
    seeds = seeds_for(3, 4, 1, 2, 5)
    assert seeds == [seed_of(3, 4, 1, 2, j) for j in range(5)] and len(set(seeds)) == 5
    assert seeds_for(3, 4, 0, 2, 5) != seeds and seeds_for(3, 4, 1, 3, 5) != seeds


@pytest.mark.parametrize("seed", [0, 2**63 - 1])  # the edges of a signed 64-bit seed
def test_draws_are_counted_per_row(seed):
    rows = uniforms([seed, 1234567], [0, 3])
    assert rows.dtype == torch.float64
    assert rows.tolist() == [uniforms([seed], 0).item(), (REFERENCE[3] >> 11) * 2.0**-53]
    one = uniforms([seed, seed], 2)  # one counter for every row
    assert one[0] == one[1] == uniforms([seed], [2])[0]
    assert bool(((0 <= rows) & (rows < 1)).all())
