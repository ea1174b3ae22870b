"""Graders as TRL-style reward functions, summed with weights by compute_rewards."""

from rlvr.rewards import RewardSpec, compute_rewards, math_accuracy
from rlvr.rewards.graders import build_grader, load_grader


def test_grader_reward_matches_the_builtin_reward():
    completions = [r"\boxed{4}", r"\boxed{5}", "4", [{"role": "assistant", "content": r"\boxed{4}"}]]
    answers = ["4", "4", "4", "4"]
    reward = build_grader({"type": "math"})
    assert reward(prompts=["q"] * 4, completions=completions, completion_ids=[[1]] * 4, answer=answers) == (
        math_accuracy(completions, answers)
    )


def test_weighted_sum_with_per_reward_components():
    exact = load_grader(
        {"type": "string_check", "name": "exact", "reference": "{{ item.answer }}", "operation": "eq"}
    )
    mentions_prompt = load_grader(
        {"type": "string_check", "name": "echo", "reference": "{{ item.prompt }}", "operation": "like"}
    )
    result = compute_rewards(
        [RewardSpec("exact", exact, 0.5), RewardSpec("echo", mentions_prompt, 2.0)],
        prompts=["2+2", "3+3"],
        completions=["4", "3+3 is 6"],
        completion_ids=[[1], [2]],
        columns={"answer": ["4", "7"]},
    )
    assert result.components == {"exact": [1.0, 0.0], "echo": [0.0, 1.0]}
    assert result.total == [0.5, 2.0]


def test_unscored_rows_are_none():
    reward = load_grader("math")
    assert reward(prompts=["q", "q"], completions=["1", r"\boxed{1}"], completion_ids=[[], []], answer=["", "1"]) == [
        None,
        1.0,
    ]
