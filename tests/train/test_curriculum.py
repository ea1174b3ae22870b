"""The curriculum: draws follow measured pass rates and move to harder prompts as the model improves."""

import math

import pytest

from rlvr.rl.curriculum import CurriculumStream, draw_weight


def test_half_solved_prompts_are_drawn_most_and_solved_ones_least():
    assert draw_weight(0.5) > draw_weight(0.8) > draw_weight(1.0)
    assert draw_weight(0.0) == draw_weight(1.0) > 0  # never unreachable
    stream = CurriculumStream(size=4, batch_prompts=1, seed=0)
    stream.observe([0, 1, 2, 3], [1.0, 0.5, 0.0, 1.0])
    counts = [0] * 4
    for _ in range(2000):
        counts[stream.next_batch()[0]] += 1
    assert counts[1] > 5 * max(counts[0], counts[2], counts[3])


def test_training_moves_to_harder_prompts_as_skill_rises():
    """A simulated learner: prompt i has difficulty i / 99; pass rate = sigmoid(8 (skill - difficulty))."""
    stream = CurriculumStream(size=100, batch_prompts=8, seed=1)
    mean_difficulty = []
    for step in range(300):
        skill = step / 300  # the model improves steadily
        batch = stream.next_batch()
        stream.observe(batch, [1 / (1 + math.exp(-8 * (skill - i / 99))) for i in batch])
        mean_difficulty.append(sum(i / 99 for i in batch) / len(batch))
    early, late = sum(mean_difficulty[50:100]) / 50, sum(mean_difficulty[250:300]) / 50
    assert late > early + 0.2


def test_batches_are_distinct_and_the_state_resumes_exactly():
    a = CurriculumStream(size=20, batch_prompts=5, seed=3)
    for _ in range(4):
        batch = a.next_batch()
        assert len(set(batch)) == 5
        a.observe(batch, [0.25 * (i % 5) for i in batch])
    b = CurriculumStream(size=20, batch_prompts=5, seed=3)
    b.load_state_dict(a.state_dict())
    assert [a.next_batch() for _ in range(3)] == [b.next_batch() for _ in range(3)]


def test_unmeasurable_groups_leave_the_estimate_alone():
    stream = CurriculumStream(size=3, batch_prompts=1, seed=0)
    stream.observe([0, 1], [float("nan"), 1.0])
    stream.observe([1], [0.0])
    assert stream.pass_rates == [None, 0.5, None]
    with pytest.raises(ValueError, match="at least 4 prompts"):
        CurriculumStream(size=3, batch_prompts=4, seed=0)
