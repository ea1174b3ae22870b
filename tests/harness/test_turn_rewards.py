"""Rewards of single turns: an agent reports them (link.reward, POST <base_url>/rlvr/reward), an environment gives
them in a Reply before the end; they are kept with their turns, add to the trajectory's reward (its return), and
with `algorithm.turn_advantages: per_turn` each turn is credited with the rewards from it on."""

import json
import math

import pytest
import torch

from rlvr.advantages import turn_advantages
from rlvr.config import AlgorithmConfig
from rlvr.envs import Reply
from rlvr.envs import rollout as conv
from rlvr.envs.sampling import sample_conversations
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.harness.group import HarnessRollout, Link
from rlvr.harness.rollout import harness_rollout
from rlvr.harness.rows import Segment
from rlvr.records import Example
from rlvr.rewards.batch import scored_rollout
from rlvr.rewards.combine import RewardResult
from rlvr.rl.batch import outcome_advantages
from rlvr.rl.turns import turn_batch_advantages
from rlvr.rollout import SamplingParams
from rlvr.seeds import seed_of

from ..envs.test_converse import run as converse_run
from ..envs.test_converse import scripted_model
from ..train.test_step import tiny_config
from .test_endpoint import HI, post
from .test_training import AGENTS, Tokens, agent

NAN = float("nan")


def test_turn_advantages_are_returns_to_go_of_the_groups_normalised_rewards():
    """By hand: the rewards 2 (A, turn 0), 0 (A, turn 1), 1 (B, turn 0), 0 (C, turn 0), −1 (C, turn 2) have mean
    0.4 and population std √1.04 = 1.0198; normalised 1.5689, −0.3922, 0.5883, −0.3922, −1.3728. A turn's
    advantage sums its trajectory's normalised rewards at that turn and after."""
    a = turn_advantages([[(1, 0.0), (0, 2.0)], [(0, 1.0)], [(2, -1.0), (0, 0.0)]], 3, eps=0.0)
    assert a.flatten().tolist() == pytest.approx([1.1767, -0.3922, 0.0, 0.5883, 0.0, 0.0, -1.7650, -1.3728, -1.3728],
                                                 abs=1e-4)


def row(prompt, parts):
    """A Segment: (ids, turn number or None for context) parts after `prompt`; sampled ids get log-prob −1."""
    s = Segment(prompt_ids=list(prompt))
    for ids, turn in parts:
        s.ids += ids
        s.model_mask += [turn is not None] * len(ids)
        s.logprobs += [-1.0 if turn is not None else 0.0] * len(ids)
        s.floors += [-math.inf] * len(ids)
        s.turn_of += [-1 if turn is None else turn] * len(ids)
    return s


def two_trajectories(outcomes=(0.0, 1.0)):
    """G = 2 of one prompt. Trajectory 0: turn 0 ([5, 6]) rewarded 1, then turn 1 ([7, 8, 9]) in a row of its own
    (its agent rewrote the history), its outcome 0. Trajectory 1: turns 0, 1, 2 ([4], [10], [11]) in one row,
    none rewarded, its outcome 1. Both return 1."""
    runs = [HarnessRollout([row([1, 2], [([5, 6], 0)]), row([1, 2, 3], [([7, 8, 9], 1)])], outcomes[0],
                           turn_rewards={0: 1.0}),
            HarnessRollout([row([1, 2], [([4], 0), ([3], None), ([10], 1), ([3], None), ([11], 2)])], outcomes[1])]
    rollout = harness_rollout([Example("q")], 2, runs, Tokens())
    part = RewardResult(total=[0.0 if o is None else o for o in outcomes], components={"agent_reward": list(outcomes)},
                        seconds={"agent_reward": 0}, reasons={"agent_reward": None})
    return scored_rollout(rollout, [part])


def advantages_by_token(scored, advantages):
    """Each row's model tokens as (token id, advantage) pairs."""
    r = scored.rollout
    return [[(int(i), round(float(a), 3)) for i, a, m in zip(ids, adv, mask) if m]
            for ids, adv, mask in zip(r.completion_ids, advantages, r.model_mask)]


def test_a_turns_reward_adds_to_the_return_and_per_turn_credits_only_the_turns_before_it():
    scored = two_trajectories()
    assert scored.rewards.tolist() == [[1.0, 1.0]]  # the returns: 0 + 1 and 1
    assert scored.rollout.row_turns.tolist()[2] == [0, -1, 1, -1, 2]
    # by default one advantage a trajectory: equal returns, nothing to learn
    assert not outcome_advantages(scored, AlgorithmConfig()).any()
    # per turn: the steps 1 (0, turn 0), 0 (0, turn 1), 1 (1, turn 2) normalise to 0.707, −1.414, 0.707
    per_turn = turn_batch_advantages(scored, eps=0.0)
    assert advantages_by_token(scored, per_turn) == [[(5, -0.707), (6, -0.707)],
                                                     [(7, -1.414), (8, -1.414), (9, -1.414)],
                                                     [(4, 0.707), (10, 0.707), (11, 0.707)]]
    assert per_turn[~scored.rollout.model_mask].eq(0).all()


def test_an_unscored_trajectory_takes_no_part_and_gets_no_advantage():
    scored = two_trajectories(outcomes=(0.0, None))
    assert math.isnan(scored.rewards[0, 1])
    assert not turn_batch_advantages(scored).any()  # (one scored trajectory: no group to compare with)


def test_the_endpoint_keeps_each_reported_reward_with_the_latest_turn(endpoint):
    rollout = endpoint.open(seed=3)
    link = Link(rollout.base_url, rollout.key)
    status, answer = post(f"{rollout.base_url}/rlvr/reward", {"reward": 1.0})
    assert status == 400 and "no turn to reward yet" in answer["error"]["message"]
    link.chat(HI, max_tokens=2)
    assert link.reward(0.5) == 0 and link.reward(0.25) == 0  # (two for one turn add up)
    link.chat(HI, max_tokens=2)
    assert link.reward(-1) == 1
    for bad in ("high", True, None, [1]):
        status, answer = post(f"{rollout.base_url}/rlvr/reward", {"reward": bad})
        assert status == 400 and "'reward' must be a finite number" in answer["error"]["message"]
    status, _ = post(f"{endpoint.url}/r/{rollout.key}/v1/rlvr/reward", {"reward": float("inf")})
    assert status == 400
    assert rollout.recorder.turn_rewards == {0: 0.75, 1: -1.0}
    endpoint.finish(rollout.key)
    assert post(f"{rollout.base_url}/rlvr/reward", {"reward": 1.0})[0] == 410


def test_an_agent_that_rewards_its_turns_trains_per_turn(tmp_path):
    """Two turns, each rewarded by the agent when answered, nothing returned: the return is their sum, each
    trajectory's first turn is credited with both rewards and its second with its own."""
    trainer = Trainer(tiny_config(tmp_path, *agent("rewards_each_turn", "algorithm.turn_advantages=per_turn")))
    scored, _ = trainer.source.take(1)
    rollout = scored.rollout
    assert rollout.env_rewards == [0.0] * len(rollout.env_rewards)  # (it returned None: its end adds 0)
    assert all(set(turns) == {0, 1} for turns in rollout.turn_rewards)
    sums = [sum(t.values()) for t in rollout.turn_rewards]
    assert scored.rewards.reshape(-1).tolist() == pytest.approx(sums)
    advantages = trainer.advantages(scored)
    g = rollout.group_size
    for p in range(rollout.num_prompts):
        steps = [v for t in range(p * g, (p + 1) * g) for v in (*rollout.turn_rewards[t].values(), 0.0)]
        mean, std = sum(steps) / len(steps), torch.tensor(steps).std(correction=0).item()
        for t in range(p * g, (p + 1) * g):
            first, second = (advantages[t][rollout.row_turns[t] == k].unique().tolist() for k in (0, 1))
            r0, r1 = rollout.turn_rewards[t][0], rollout.turn_rewards[t][1]
            z = [(r - mean) / (std + 1e-4) for r in (r0, r1, 0.0)]
            assert second == pytest.approx([z[1] + z[2]], abs=1e-5)
            assert first == pytest.approx([z[0] + z[1] + z[2]], abs=1e-5)


def test_a_run_whose_agent_rewards_turns_trains_and_logs_them(tmp_path):
    train_grpo(tiny_config(tmp_path, *agent("rewards_each_turn", "algorithm.turn_advantages=per_turn")))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all("env/turn_rewards" in m and m["grad_norm"] > 0 for m in lines)


def test_per_turn_needs_multi_turn_rollouts_and_its_own_advantages(tmp_path):
    with pytest.raises(UserError, match="per_turn credits the turns of multi-turn rollouts"):
        tiny_config(tmp_path, "algorithm.turn_advantages=per_turn")
    with pytest.raises(UserError, match="per_turn makes the advantages itself"):
        tiny_config(tmp_path, *agent("rewards_each_turn", "algorithm.turn_advantages=per_turn",
                                     f"algorithm.advantage_fn={AGENTS}:keeps_history"))


class RewardsEachMessage:
    """An environment that gives each model message 0.5 before the end, and the trajectory 1.0 at its end."""

    def __init__(self):
        self.left = 2

    def reset(self, row, messages, seed):
        return messages

    def step(self, text):
        self.left -= 1
        if self.left:
            return Reply(message={"role": "user", "content": "more"}, done=False, reward=0.5)
        return Reply(message=None, done=True, reward=1.0)


def test_an_environments_reward_before_the_end_is_its_messages(tiny, monkeypatch):
    model, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ["a", "b", "c", "d"])
    [t] = converse_run(tiny, [RewardsEachMessage()])
    assert t.turn_rewards == {0: 0.5} and t.reward == 1.0
    tensors = conv.transcript_tensors([t], pad_id=tokenizer.pad_token_id)
    turns = tensors["row_turns"][0][tensors["model_mask"][0]].tolist()
    assert turns == [0] * turns.count(0) + [1] * turns.count(1) and turns.count(0) == 2  # ("a" and its end)
    out = sample_conversations(model, tokenizer, [Example("q")], [HI], 1, SamplingParams(6, 1.0),
                               make_env=RewardsEachMessage, max_turns=3, max_tokens=200,
                               stop_ids=[tokenizer.eos_token_id], seeds=[seed_of(7, 0)])
    assert out.turn_rewards == [{0: 0.5}] and out.row_turns.shape == out.completion_ids.shape
    part = RewardResult(total=[1.0], components={"environment_reward": [1.0]}, seconds={"environment_reward": 0},
                        reasons={"environment_reward": None})
    assert scored_rollout(out, [part]).rewards.tolist() == [[1.5]]  # (its return)
