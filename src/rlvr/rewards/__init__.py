"""Rewards: score each completion with verifiable checks (rollout ─▶ **rewards** ─▶ advantages).

Reward functions follow TRL's GRPOTrainer convention, so TRL reward functions work unchanged:
``fn(prompts=..., completions=..., completion_ids=..., **columns) -> list[float | None]``.

- math.py: maths answer extraction and equivalence; `math_accuracy`, `math_accuracy_lenient`
- symbolic.py: math-verify, guarded against answers that would never finish
- workers.py: worker processes giving each symbolic comparison a hard time bound; `match_many`
- format.py: `boxed_format`, `think_answer_format`, `soft_think_answer_format`
- countdown.py: `countdown` (also the 24 game), an arithmetic checker that never calls eval()
- puzzles.py: `sudoku`, every row, column, box and given checked
- language.py: `language_consistency`, the share of letters in the target script (R1)
- shaping.py: `overlong_penalty`, DAPO's soft penalty near the token limit
- loading.py: `load_reward_function` from a built-in name, ``module:function`` or ``file.py:function``
- combine.py: `compute_rewards`, the weighted sum of several reward functions, run concurrently
"""

from rlvr.rewards.combine import RewardResult, RewardSpec, compute_rewards
from rlvr.rewards.countdown import countdown, countdown_expression, evaluate_expression
from rlvr.rewards.format import boxed_format, soft_think_answer_format, think_answer_format
from rlvr.rewards.language import language_consistency, script_share
from rlvr.rewards.loading import BUILTIN_REWARDS, load_reward_function
from rlvr.rewards.math import (
    answers_match,
    boxed_contents,
    exact_number,
    extract_answer,
    gold_answer,
    is_hedged,
    math_accuracy,
    math_accuracy_lenient,
    normalize_number,
    quick_match,
)
from rlvr.rewards.puzzles import sudoku
from rlvr.rewards.shaping import overlong_penalty
from rlvr.rewards.text import completion_text
from rlvr.rewards.workers import PoolStats, WorkerPool, match_many

__all__ = [
    "BUILTIN_REWARDS",
    "PoolStats",
    "RewardResult",
    "RewardSpec",
    "WorkerPool",
    "answers_match",
    "boxed_contents",
    "boxed_format",
    "completion_text",
    "compute_rewards",
    "countdown",
    "countdown_expression",
    "evaluate_expression",
    "exact_number",
    "extract_answer",
    "gold_answer",
    "is_hedged",
    "language_consistency",
    "load_reward_function",
    "match_many",
    "math_accuracy",
    "math_accuracy_lenient",
    "normalize_number",
    "overlong_penalty",
    "quick_match",
    "script_share",
    "soft_think_answer_format",
    "sudoku",
    "think_answer_format",
]
