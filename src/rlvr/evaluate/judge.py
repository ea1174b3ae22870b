"""A reward of yours as the judge of an evaluation: `rlvr eval --data mine.jsonl --reward judge.py:check`
(from Python, the function itself). A completion is correct where the reward scores it `correct_at` or more
(default 1.0); None (not scored) leaves it out, as a verifier's None does. The reward reads the rows'
columns as in training, and they are checked to be there before the model loads.
"""

from __future__ import annotations

import dataclasses

from rlvr.config import RewardConfig
from rlvr.data.trl_form import trl_form
from rlvr.errors import UserError
from rlvr.evaluate.benchmarks import Benchmark
from rlvr.records import Scoring
from rlvr.rewards import load_reward_function
from rlvr.rewards.registry import required_columns
from rlvr.rewards.routing import as_verdict


def judged_by(benchmark: Benchmark, reward: RewardConfig, chat: bool) -> Benchmark:
    """`benchmark` with `reward` (its params bound) as its strict and lenient verifier; with the `chat` template
    its rows in TRL's form, as training hands them to rewards (rlvr.data.trl_form)."""
    verdict = as_verdict(load_reward_function(reward.name, **reward.params), reward.correct_at, reward.name,
                         reward.timeout_s, "reward.timeout_s")
    examples = trl_form(benchmark.examples, chat=chat)
    for example in examples:
        missing = [c for c in required_columns(verdict) if c not in example.columns]
        if missing:
            raise UserError(f"problem {example.index + 1} of {benchmark.origin} has no {missing[0]!r} column, which "
                            f"the reward '{reward.name}' needs to judge it (its columns: "
                            f"{', '.join(sorted(example.columns)) or 'none'}); add it, or judge with another reward")
    rule = f"the reward {reward.name} scores it {reward.correct_at:g} or more"
    scoring = Scoring(rewards=((reward.name, 1.0),), strict=reward.name, lenient=reward.name, extraction=(rule, rule))
    return dataclasses.replace(benchmark, examples=examples, scoring=scoring, judge=(verdict, verdict))
