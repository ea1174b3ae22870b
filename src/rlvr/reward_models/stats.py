"""What a reward model directory holds beside its weights: `rlvr_reward_model.json`.

Raw Bradley–Terry scores have an arbitrary offset and scale (the loss only sees differences), so
each checkpoint records the mean and std of its scores over training completions; a reward is
used normalised, (r − mean) / (std + ε), which puts it on the scale of a 0/1 verifier.

Layout written by `rlvr rm`: RUN/checkpoints/step-N/model/{config.json, model.safetensors,
tokenizer files, rlvr_reward_model.json}. `find_reward_model` accepts any of those three levels.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from rlvr.errors import UserError
from rlvr.models import find_model_dir

STATS_FILE = "rlvr_reward_model.json"
EPS = 1e-6


@dataclass(frozen=True)
class ScoreStats:
    mean: float  # of the raw scores of the training completions measured
    std: float  # population std of the same scores
    count: int  # how many completions were scored
    max_length: int  # tokens per conversation the model was trained with; scoring uses the same

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


def score_stats(scores: list[float], max_length: int) -> ScoreStats:
    """Mean and population std of `scores`.

    >>> score_stats([1.0, 3.0], max_length=64)
    ScoreStats(mean=2.0, std=1.0, count=2, max_length=64)
    """
    n = len(scores)
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    return ScoreStats(mean, std, n, max_length)


def normalise(scores: list[float], stats: ScoreStats) -> list[float]:
    """(r − mean) / (std + ε) for each raw score r.

    >>> [round(r, 4) for r in normalise([1.0, 2.0, 3.0], ScoreStats(mean=2.0, std=1.0, count=3, max_length=64))]
    [-1.0, 0.0, 1.0]
    """
    return [(s - stats.mean) / (stats.std + EPS) for s in scores]


def find_reward_model(path: str | Path) -> Path:
    """The model directory holding STATS_FILE, given it, a checkpoint (step-N) or a run directory
    (its latest checkpoint)."""
    path = Path(path).expanduser()
    found = find_model_dir(path, marker=STATS_FILE)
    if found is not None:
        return found
    what = "does not exist" if not path.exists() else f"holds no {STATS_FILE}"
    raise UserError(
        f"reward model {path} {what}: give the run directory of `rlvr rm`, one of its checkpoints/step-N, or their model/ folder"
    )


def read_stats(model_dir: Path) -> ScoreStats:
    try:
        data = json.loads((model_dir / STATS_FILE).read_text())
        return ScoreStats(float(data["mean"]), float(data["std"]), int(data["count"]), int(data["max_length"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{model_dir / STATS_FILE} is unreadable ({type(e).__name__}: {e}); train the reward model again") from None
