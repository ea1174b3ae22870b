"""Score statistics: computed by hand, found at every level of a run directory, unreadable files reported."""

import pytest

from rlvr.errors import UserError
from rlvr.models.reward_model import STATS_FILE, ScoreStats, find_reward_model, normalise, read_stats, score_stats


def test_stats_by_hand():
    stats = score_stats([1.0, 2.0, 6.0], max_length=32)
    assert stats.mean == 3.0 and stats.std == pytest.approx((14 / 3) ** 0.5) and stats.count == 3
    assert normalise([3.0, 5.0], ScoreStats(3.0, 2.0, 3, 32)) == pytest.approx([0.0, 1.0], abs=1e-6)


def test_find_reward_model_at_every_level(tmp_path):
    model = tmp_path / "run" / "checkpoints" / "step-000007" / "model"
    model.mkdir(parents=True)
    (model / STATS_FILE).write_text(ScoreStats(0.5, 2.0, 10, 64).to_json())
    for path in (tmp_path / "run", model.parent, model):
        assert find_reward_model(path) == model
    assert read_stats(model) == ScoreStats(0.5, 2.0, 10, 64)


def test_not_a_reward_model(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        find_reward_model(tmp_path / "missing")
    with pytest.raises(UserError, match=f"holds no {STATS_FILE}"):
        find_reward_model(tmp_path)
    (tmp_path / STATS_FILE).write_text('{"mean": 1}')
    with pytest.raises(UserError, match="unreadable"):
        read_stats(tmp_path)
