"""Mixed rewards per prompt (R1 stage 4): a column routes rows to rule rewards or a reward model."""

import pytest

from rlvr.config import load_config
from rlvr.errors import UserError
from rlvr.rewards import RewardSpec, compute_rewards, load_reward_function
from rlvr.rewards.routing import only_where

calls = []


def preference(completions, prompts, **kwargs):
    """Stands in for a reward model: records what it was asked to score."""
    calls.append(list(prompts))
    return [0.25 * len(c) for c in completions]


def test_each_row_is_scored_only_by_the_rewards_its_column_selects():
    calls.clear()
    specs = [
        RewardSpec("math_accuracy", only_where(load_reward_function("math_accuracy"), {"kind": "reasoning"})),
        RewardSpec("preference", only_where(preference, {"kind": ["general", "chat"]}), weight=2.0),
    ]
    result = compute_rewards(
        specs, prompts=["1+1?", "hi", "2+2?", "yo"], completions=[r"\boxed{2}", "hello", r"\boxed{5}", "hey"],
        completion_ids=[[1], [2], [3], [4]],
        columns={"kind": ["reasoning", "general", "reasoning", "chat"], "answer": ["2", None, "4", None]},
    )
    assert result.components["math_accuracy"] == [1.0, None, 0.0, None]
    assert result.components["preference"] == [None, 1.25, None, 0.75]
    assert result.total == [1.0, 2.5, 0.0, 1.5]
    assert calls == [["hi", "yo"]]  # the reward model never saw the reasoning prompts


def test_a_missing_column_is_one_line_naming_it():
    routed = only_where(preference, {"kind": "general"}, name="preference")
    with pytest.raises(UserError, match="no 'kind' column"):
        routed(completions=["a"], prompts=["p"])
    with pytest.raises(UserError, match="`when` is empty"):
        only_where(preference, {})


def test_when_is_read_from_the_config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("rewards:\n  - {name: math_accuracy, when: {kind: reasoning}}\n"
                    "  - {name: boxed_format, weight: 0.1}\n")
    config = load_config(path)
    assert config.rewards[0].when == {"kind": "reasoning"} and config.rewards[1].when is None


def test_the_trainer_builds_routed_rewards_from_the_config(tmp_path):
    from rlvr.rl.build import build_parts

    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"prompt": "1+1?", "answer": "2", "kind": "reasoning"}\n{"prompt": "hi", "kind": "general"}\n')
    path = tmp_path / "c.yaml"
    path.write_text(f"model: {{name: tiny}}\ndata: {{train: '{rows}', train_size: 8, eval_size: 2}}\n"
                    "rewards:\n  - {name: math_accuracy, when: {kind: reasoning}}\n")
    parts = build_parts(load_config(path, output_dir=str(tmp_path / "run")))
    fn = parts.rewards[0].fn
    assert fn(completions=[r"\boxed{2}", r"\boxed{2}"], kind=["reasoning", "general"], answer=["2", "2"]) == [1.0, None]
