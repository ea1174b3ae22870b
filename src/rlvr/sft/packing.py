"""A step's examples -> micro-batches of rows, optionally packed, each at most micro_batch_tokens.

Packing puts several examples into one row of at most max_length tokens without letting them
see each other: every token's segment id says which example it belongs to, attention is causal
*within* a segment only (a block-diagonal additive mask, `attention_bias`), and position ids
restart at 0 for every example, so each example is computed exactly as if it were alone. Packing
happens inside a step's batch, so it changes speed (less padding), never the loss.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlvr.sft.data import SFTExample
from rlvr.sft.masking import IGNORE

PADDING = -1  # segment id of padding tokens (they attend only to each other, and carry no loss)


@dataclass
class MicroBatch:
    input_ids: torch.Tensor  # [R, T] long, pad id at padding
    labels: torch.Tensor  # [R, T] long, IGNORE where not trained and at padding
    position_ids: torch.Tensor  # [R, T] long, restarting at 0 for each example
    segment_ids: torch.Tensor  # [R, T] long, index of the example within its row, PADDING at padding

    @property
    def real_tokens(self) -> int:
        return int((self.segment_ids != PADDING).sum())


def pack(lengths: list[int], capacity: int) -> list[list[int]]:
    """Indices grouped into rows of total length <= capacity, first-fit decreasing (deterministic).

    >>> pack([5, 3, 4, 2, 6], capacity=8)
    [[4, 3], [0, 1], [2]]
    """
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        slot = next((r for r, free in enumerate(room) if free >= lengths[i]), None)
        if slot is None:
            rows.append([i])
            room.append(capacity - lengths[i])
        else:
            rows[slot].append(i)
            room[slot] -= lengths[i]
    return rows


def micro_batches(
    examples: list[SFTExample], *, packing: bool, max_length: int, micro_batch_tokens: int, pad_id: int
) -> list[MicroBatch]:
    """Rows (one example each, or packed up to max_length), longest first, grouped so that
    rows × longest row <= micro_batch_tokens (at least one row per micro-batch)."""
    lengths = [len(e.input_ids) for e in examples]
    rows = pack(lengths, max_length) if packing else [[i] for i in range(len(examples))]
    width: Callable[[list[int]], int] = lambda row: sum(lengths[i] for i in row)  # noqa: E731
    rows.sort(key=width, reverse=True)  # stable: equal widths keep their order
    batches: list[MicroBatch] = []
    start = 0
    while start < len(rows):
        count = max(1, micro_batch_tokens // width(rows[start]))
        batches.append(collate([[examples[i] for i in row] for row in rows[start : start + count]], pad_id))
        start += count
    return batches


def collate(rows: list[list[SFTExample]], pad_id: int) -> MicroBatch:
    """Right-padded tensors of rows of examples laid end to end.

    >>> mb = collate([[SFTExample([7, 8], [IGNORE, 8]), SFTExample([9], [9])], [SFTExample([5], [5])]], pad_id=0)
    >>> mb.input_ids.tolist(), mb.position_ids.tolist(), mb.segment_ids.tolist()
    ([[7, 8, 9], [5, 0, 0]], [[0, 1, 0], [0, 0, 1]], [[0, 0, 1], [0, -1, -1]])
    """
    width = max(sum(len(e.input_ids) for e in row) for row in rows)
    ids, labels, positions, segments = [], [], [], []
    for row in rows:
        r_ids = [t for e in row for t in e.input_ids]
        r_labels = [t for e in row for t in e.labels]
        r_pos = [p for e in row for p in range(len(e.input_ids))]
        r_seg = [k for k, e in enumerate(row) for _ in e.input_ids]
        pad = width - len(r_ids)
        ids.append(r_ids + [pad_id] * pad)
        labels.append(r_labels + [IGNORE] * pad)
        positions.append(r_pos + list(range(pad)))
        segments.append(r_seg + [PADDING] * pad)
    as_long: Callable[[list[list[int]]], torch.Tensor] = lambda rows: torch.tensor(rows, dtype=torch.long)  # noqa: E731
    return MicroBatch(as_long(ids), as_long(labels), as_long(positions), as_long(segments))


def attention_bias(segment_ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """segment_ids [R, T] -> additive mask [R, 1, T, T]: 0 where query t may attend to key s
    (s <= t, same segment), the dtype's minimum elsewhere. A float mask, not a boolean one,
    because transformers' eager attention adds the mask to the scores (SDPA takes either).

    >>> attention_bias(torch.tensor([[0, 0, 1]]), torch.float32)[0, 0].eq(0).int().tolist()
    [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    """
    t = segment_ids.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool, device=segment_ids.device).tril()
    allowed = (segment_ids[:, :, None] == segment_ids[:, None, :]) & causal
    bias = torch.zeros(allowed.shape, dtype=dtype, device=segment_ids.device)
    return bias.masked_fill(~allowed, torch.finfo(dtype).min)[:, None]


def loss_targets(batch: MicroBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """(targets [R, T−1], trained [R, T−1] bool): position t predicts token t + 1, and is trained
    when that token is, inside the same example (never across a packing boundary)."""
    targets = batch.labels[:, 1:]
    trained = (targets != IGNORE) & (batch.segment_ids[:, 1:] == batch.segment_ids[:, :-1])
    return targets, trained
