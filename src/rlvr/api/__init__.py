"""rlvr from Python: `GRPO` trains, resumes, evaluates and saves a run; `evaluate_model` evaluates any model;
`SFT`, `RewardModel` and `PPO` are the rest of DeepSeek-R1's recipe, with the same conventions.

    from rlvr import GRPO, PPO, SFT, RewardModel, evaluate_model

Both run exactly what the `rlvr train` and `rlvr eval` commands run, with functions and in-memory data
accepted wherever the command line takes a name or a path.
"""

from rlvr.api.evaluation import evaluate_model
from rlvr.api.grpo import GRPO, PPO
from rlvr.api.supervised import SFT, RewardModel

__all__ = ["GRPO", "PPO", "SFT", "RewardModel", "evaluate_model"]
