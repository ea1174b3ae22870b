"""Emergence metrics: reflection phrases, length distribution, format share, group reward spread."""

import pytest
import torch

from rlvr.evaluate.emergence import length_quantiles, reflection_rate, reflects, reward_spread
from rlvr.grpo.trainer import Trainer

from ..train.test_step import DIGITS, step_with_batch, tiny_config


def test_reflection_phrases_match_whole_words_in_any_case():
    assert reflects("WAIT. Let me reconsider.", ["let me reconsider"])
    assert reflects("let me\nverify", ["let me verify"])  # any whitespace between the words
    assert not reflects("The waiter actualized it.", ["wait", "actually"])
    assert reflection_rate(["hmm", "ok", "fine", "Hmm!"], ["hmm"]) == 0.5
    assert reflection_rate([], ["wait"]) == 0.0


def test_length_quantiles_and_reward_spread_by_hand():
    assert length_quantiles([10] * 5 + [100] * 5) == {"p10": 10.0, "p50": 55.0, "p90": 100.0}
    spread = reward_spread(torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5]]))
    assert spread == {"std_mean": pytest.approx(0.25), "range_mean": 0.5, "range_max": 1.0}


def test_training_logs_them_with_a_configurable_phrase_list(tmp_path, monkeypatch):
    trainer = Trainer(tiny_config(tmp_path, DIGITS, "reflection_phrases=[a, e]"))
    metrics, batch = step_with_batch(trainer, monkeypatch)
    texts = batch.rollout.completions
    assert metrics["reflection_rate"] == reflection_rate(texts, ["a", "e"])
    for key in ("completion_length/p10", "completion_length/p50", "completion_length/p90", "format_share",
                "groups/reward_std_mean", "groups/reward_range_mean", "groups/reward_range_max"):
        assert key in metrics, key
    assert metrics["format_share"] == 0.0  # a random tiny model boxes nothing
