"""Rewards: score each completion with verifiable checks (rollout ─▶ **rewards** ─▶ advantages).

Reward functions follow TRL's GRPOTrainer convention, so TRL reward functions work unchanged:
``fn(prompts=..., completions=..., completion_ids=..., **columns) -> list[float | None]``.

- math.py: maths answer extraction and equivalence; `math_accuracy`, `math_accuracy_lenient`
- symbolic.py: math-verify, guarded against answers that would never finish
- format.py: `boxed_format`, `think_answer_format`, `soft_think_answer_format`
- countdown.py: `countdown`, an arithmetic checker that never calls eval()
- loading.py: `load_reward_function` from a built-in name, ``module:function`` or ``file.py:function``
- combine.py: `compute_rewards`, the weighted sum of several reward functions
"""

from rlvr.rewards.combine import RewardResult, RewardSpec, compute_rewards
from rlvr.rewards.countdown import countdown, countdown_expression, evaluate_expression
from rlvr.rewards.format import boxed_format, soft_think_answer_format, think_answer_format
from rlvr.rewards.loading import BUILTIN_REWARDS, load_reward_function
from rlvr.rewards.math import (
    answers_match,
    boxed_contents,
    extract_answer,
    gold_answer,
    is_hedged,
    math_accuracy,
    math_accuracy_lenient,
    normalize_number,
)
from rlvr.rewards.text import completion_text

__all__ = [
    "BUILTIN_REWARDS",
    "RewardResult",
    "RewardSpec",
    "answers_match",
    "boxed_contents",
    "boxed_format",
    "completion_text",
    "compute_rewards",
    "countdown",
    "countdown_expression",
    "evaluate_expression",
    "extract_answer",
    "gold_answer",
    "is_hedged",
    "load_reward_function",
    "math_accuracy",
    "math_accuracy_lenient",
    "normalize_number",
    "soft_think_answer_format",
    "think_answer_format",
]
