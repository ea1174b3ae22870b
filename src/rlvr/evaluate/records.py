"""Typed records of an evaluation: one per completion, one per problem (a line of samples.jsonl).

    Benchmark ─sample_problems─▶ ProblemRecord (greedy + n SampleRecords) ─summarise─▶ summary.json
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class SampleRecord:
    """One completion and its verdicts.

    `correct[mode]` is 1.0 / 0.0, or None when the problem cannot be checked (unreadable gold).
    `answer[mode]` is the answer it votes for in majority voting (None: no vote).
    `budget_correct[mode][j]` is the verdict on the completion cut to the j-th token budget.
    """

    text: str
    tokens: int
    truncated: bool
    correct: dict[str, float | None]
    answer: dict[str, str | None]
    budget_correct: dict[str, list[float | None]] = field(default_factory=dict)
    score: float | None = None  # the reward / process-reward model's score (best-of-N selection)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SampleRecord:
        return cls(**data)


@dataclass
class ProblemRecord:
    """A problem with its greedy completion (or None) and its n sampled completions."""

    id: str
    index: int
    prompt: str  # the rendered prompt text the model continued
    gold: Any  # the reference answer as stored (or None for code problems)
    greedy: SampleRecord | None
    samples: list[SampleRecord]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProblemRecord:
        greedy = data.get("greedy")
        return cls(
            id=data["id"], index=data["index"], prompt=data["prompt"], gold=data.get("gold"),
            greedy=SampleRecord.from_json(greedy) if greedy else None,
            samples=[SampleRecord.from_json(s) for s in data["samples"]],
        )

    def checkable(self, mode: str) -> bool:
        """Whether the verifier could judge this problem (its samples are not all None)."""
        return any(s.correct[mode] is not None for s in self.samples) or (
            self.greedy is not None and self.greedy.correct[mode] is not None
        )
