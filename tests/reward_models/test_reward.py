"""`reward_model` as a GRPO reward: loaded by name with params, normalised, cached per path."""

from pathlib import Path

import pytest

from rlvr.errors import UserError
from rlvr.reward_models.pairs import load_pairs, split_pairs
from rlvr.rewards import RewardSpec, compute_rewards
from rlvr.rewards import reward_model as reward_module
from rlvr.rewards.loading import BUILTIN_REWARDS, load_reward_function


def test_normalised_rewards_have_mean_zero_on_the_training_completions(trained):
    config, _ = trained
    fn = load_reward_function("reward_model", path=config.output_dir)
    assert fn.__name__ == "reward_model" and BUILTIN_REWARDS["reward_model"] is reward_module.reward_model
    # the pairs the stats were measured on
    train, _ = split_pairs(load_pairs(config.data), config.eval_fraction, config.seed)
    prompts = [p.prompt for p in train for _ in range(2)]
    completions = [c for p in train for c in (p.chosen, p.rejected)]
    rewards = fn(prompts=prompts, completions=completions, completion_ids=[[0]] * len(completions))
    mean = sum(rewards) / len(rewards)
    std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
    assert mean == pytest.approx(0.0, abs=1e-3) and std == pytest.approx(1.0, abs=1e-3)
    assert sum(r > 0 for r in rewards[0::2]) > 0.9 * len(train)  # chosen completions above average


def test_chat_completions_and_the_grpo_call_path(trained):
    config, _ = trained
    spec = RewardSpec("reward_model", load_reward_function("reward_model", path=config.output_dir))
    prompts = [[{"role": "user", "content": "say abc"}]] * 2
    completions = [[{"role": "assistant", "content": "hello!"}], [{"role": "assistant", "content": "hello"}]]
    result = compute_rewards([spec], prompts=prompts, completions=completions, completion_ids=[[1], [2]],
                             columns={"answer": ["", ""]})
    chosen, rejected = result.total
    assert chosen > rejected


def test_model_is_loaded_once_per_path(trained):
    config, _ = trained
    run = Path(config.output_dir)
    first = reward_module.cached_scorer(run)
    assert reward_module.cached_scorer(run / "checkpoints" / "step-000015" / "model") is first  # same directory
    assert reward_module.cached_scorer(run, batch_size=4) is not first


def test_mistakes_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="needs the model: params: {path: RUN_DIR}"):
        BUILTIN_REWARDS["reward_model"](prompts=["p"], completions=["c"])
    with pytest.raises(UserError, match="does not exist"):
        load_reward_function("reward_model", path=str(tmp_path / "nope"))(prompts=["p"], completions=["c"])
    with pytest.raises(UserError, match="has no parameter 'pth'; did you mean 'path'"):
        load_reward_function("reward_model", pth="x")
