"""Dynamic sampling: zero-variance groups replaced by fresh ones, up to a cap; group surgery is lossless."""

import torch

from rlvr.records import Example, Rollout, ScoredRollout
from rlvr.rl.dynamic import concat_scored, fill_informative, take_groups


def scored(rewards, tag, prompt_len=3, completion_len=4):
    """A ScoredRollout with P = len(rewards) groups; every tensor carries `tag` so its origin is visible."""
    p, g = len(rewards), len(rewards[0])
    n = p * g
    rollout = Rollout(
        examples=[Example(prompt=f"{tag}{i}") for i in range(p)], group_size=g,
        prompt_ids=torch.full((p, prompt_len), tag), prompt_mask=torch.ones(p, prompt_len, dtype=torch.bool),
        completion_ids=torch.arange(n * completion_len).view(n, completion_len) + 1000 * tag,
        completion_mask=torch.ones(n, completion_len, dtype=torch.bool),
        sampling_logprobs=torch.full((n, completion_len), -float(tag)), truncated=torch.zeros(n, dtype=torch.bool),
        completions=[f"{tag}:{i}" for i in range(n)],
    )
    r = torch.tensor(rewards, dtype=torch.float32)
    return ScoredRollout(rollout=rollout, rewards=r, reward_components={"acc": r.clone()}, reward_seconds={"acc": 1.0})


def test_take_then_concat_restores_the_batch_and_pads_on_the_right_sides():
    a = scored([[1, 0], [0, 0], [1, 1]], tag=1)
    parts = [take_groups(a, [0]), take_groups(a, [1, 2])]
    whole = concat_scored(parts)
    for field in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "sampling_logprobs", "truncated"):
        assert torch.equal(getattr(whole.rollout, field), getattr(a.rollout, field)), field
    assert torch.equal(whole.rewards, a.rewards) and whole.rollout.completions == a.rollout.completions
    b = scored([[0, 1]], tag=2, prompt_len=5, completion_len=2)
    mixed = concat_scored([a, b])
    assert mixed.rollout.prompt_ids.shape == (4, 5) and mixed.rollout.completion_ids.shape == (8, 4)
    assert mixed.rollout.prompt_mask[0].tolist() == [False, False, True, True, True]  # left padding
    assert mixed.rollout.completion_mask[6].tolist() == [True, True, False, False]  # right padding


def test_surgery_keeps_the_support_floors_and_the_version():
    import dataclasses
    import math

    a = scored([[1, 0], [0, 0]], tag=1)
    floors = torch.arange(16, dtype=torch.float32).view(4, 4)
    a = dataclasses.replace(a, rollout=dataclasses.replace(a.rollout, support_floors=floors, version=3))
    kept = take_groups(a, [1])
    assert torch.equal(kept.rollout.support_floors, floors[2:]) and kept.rollout.version == 3
    b = scored([[0, 1]], tag=2, completion_len=2)  # nothing cut where it was sampled, one version later
    mixed = concat_scored([a, dataclasses.replace(b, rollout=dataclasses.replace(b.rollout, version=4))])
    assert torch.equal(mixed.rollout.support_floors[:4], floors) and mixed.rollout.version == 3
    assert (mixed.rollout.support_floors[4:] == -math.inf).all()


def test_zero_variance_groups_are_replaced_until_the_batch_is_full():
    first = scored([[1, 0], [0, 0], [1, 1], [0, 1]], tag=1)  # groups 0 and 3 informative
    rounds = {1: scored([[0, 0], [1, 0], [1, 1], [1, 1]], tag=2), 2: scored([[0, 1], [1, 0], [0, 0], [0, 0]], tag=3)}
    asked = []

    def more(round_):
        asked.append(round_)
        return rounds[round_]

    batch, stats = fill_informative(first, more, max_rounds=5)
    assert asked == [1, 2] and stats.rounds == 3 and stats.padded_groups == 0
    assert [ex.prompt for ex in batch.rollout.examples] == ["10", "13", "21", "30"]
    assert not (batch.rewards.std(dim=1) == 0).any()
    assert stats.dropped_groups == 2 + 3 + 2  # every zero-variance group sampled
    assert batch.reward_seconds == {"acc": 3.0}  # all three rounds were scored


def test_the_cap_tops_the_batch_up_with_set_aside_groups():
    first = scored([[1, 0], [0, 0], [1, 1]], tag=1)
    batch, stats = fill_informative(first, lambda r: scored([[0, 0], [1, 1], [0, 0]], tag=2), max_rounds=2)
    assert stats.rounds == 2 and stats.padded_groups == 2 and batch.rollout.num_prompts == 3
    assert [ex.prompt for ex in batch.rollout.examples] == ["10", "11", "12"]


def test_one_round_is_plain_sampling():
    first = scored([[0, 0], [1, 1]], tag=1)
    batch, stats = fill_informative(first, lambda r: (_ for _ in ()).throw(AssertionError("resampled")), max_rounds=1)
    assert stats.rounds == 1 and [ex.prompt for ex in batch.rollout.examples] == ["10", "11"]


def test_group_surgery_keeps_the_model_mask_of_multi_turn_rollouts():
    import dataclasses

    a = scored([[1, 0], [0, 1]], tag=1)
    model_mask = torch.tensor([[1, 1, 0, 1]] * 4, dtype=torch.bool)  # the third token: the environment's
    a = dataclasses.replace(a, rollout=dataclasses.replace(a.rollout, model_mask=model_mask))
    whole = concat_scored([take_groups(a, [0]), take_groups(a, [1])])
    assert torch.equal(whole.rollout.model_mask, model_mask)
    one_turn = scored([[0, 1]], tag=2, completion_len=2)  # no model mask: every completion token is the model's
    mixed = concat_scored([a, one_turn])
    assert mixed.rollout.model_mask[4:].tolist() == [[True, True, False, False]] * 2


def test_group_surgery_keeps_each_conversations_reward_counts_and_transcript():
    import dataclasses

    a = scored([[1, 0], [0, 1], [1, 1]], tag=1)
    per_row = {"env_rewards": [0.5, None, 1.0, 0.0, 0.25, 0.75],
               "env_info": [{"turns": float(i)} for i in range(6)],
               "transcripts": [[{"role": "assistant", "content": str(i)}] for i in range(6)]}
    a = dataclasses.replace(a, rollout=dataclasses.replace(a.rollout, **per_row))
    picked = take_groups(a, [2, 0])
    assert picked.rollout.env_rewards == [0.25, 0.75, 0.5, None]
    assert [t[0]["content"] for t in picked.rollout.transcripts] == ["4", "5", "0", "1"]
    whole = concat_scored([take_groups(a, [0]), take_groups(a, [1, 2])])
    for name, values in per_row.items():
        assert getattr(whole.rollout, name) == values, name
