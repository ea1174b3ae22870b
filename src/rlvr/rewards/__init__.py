"""Rewards: score each completion with verifiable checks (rollout ─▶ **rewards** ─▶ advantages).

Every reward is a function with TRL's GRPOTrainer signature, so TRL reward functions work unchanged:
``fn(prompts=..., completions=..., completion_ids=..., **columns) -> list[float | None]``; a reward
may return `Scores`, the same list with a short reason per completion. One registry finds them all.

- registry.py: the built-in rewards by name; loading.py: `load_reward_function` from a built-in name,
  a grader type or spec file, ``module:function`` or ``file.py:function``
- combine.py: `compute_rewards`, the weighted sum of several reward functions, run concurrently
- batch.py: `score_rollout`, the rewards stage of a step
- scores.py: `Scores` (rewards with reasons), `GradeResult`
- math.py + extraction.py + symbolic.py + workers.py: `math_accuracy(_lenient)`: answer extraction
  and equivalence, the symbolic step in worker processes with a hard time bound
- format.py: `boxed_format`, `think_answer_format`, `soft_think_answer_format`
- countdown.py: `countdown` (also the 24 game), an arithmetic checker that never calls eval()
- puzzles.py: `sudoku`, every row, column, box and given checked
- code.py: `code_tests`, programs run against the rows' tests in the sandbox (rlvr.sandbox)
- language.py: `language_consistency`, the share of letters in the target script (R1)
- shaping.py: `overlong_penalty`, DAPO's soft penalty near the token limit
- routing.py: `only_where`, a reward for the rows whose columns match
- reward_model.py: a trained reward model as a reward, and as a best-of-N scorer
- graders/: rewards described by a spec after OpenAI's graders (string_check, judges, multi, ...)
- cli.py: ``rlvr grade``
"""

from rlvr.rewards.combine import RewardResult, RewardSpec, compute_rewards, grade_rows
from rlvr.rewards.countdown import countdown, countdown_expression, evaluate_expression
from rlvr.rewards.extraction import boxed_contents, extract_answer
from rlvr.rewards.format import FORMATS, boxed_format, soft_think_answer_format, think_answer_format
from rlvr.rewards.language import language_consistency, script_share
from rlvr.rewards.loading import load_reward_function
from rlvr.rewards.math import (
    answers_match,
    exact_number,
    gold_answer,
    is_hedged,
    match_many,
    math_accuracy,
    math_accuracy_lenient,
    normalize_number,
    quick_match,
)
from rlvr.rewards.puzzles import sudoku
from rlvr.rewards.registry import BUILTIN_REWARDS
from rlvr.rewards.scores import GradeResult, Scores
from rlvr.rewards.shaping import overlong_penalty
from rlvr.rewards.text import completion_text
from rlvr.rewards.workers import PoolStats, WorkerPool

__all__ = [
    "BUILTIN_REWARDS",
    "FORMATS",
    "GradeResult",
    "PoolStats",
    "RewardResult",
    "RewardSpec",
    "Scores",
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
    "grade_rows",
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
