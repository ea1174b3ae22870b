"""rlvr from Python: `GRPO` trains, resumes, evaluates and saves a run; `evaluate_model` evaluates any model.

    from rlvr import GRPO, evaluate_model

Both run exactly what the `rlvr train` and `rlvr eval` commands run, with functions and in-memory data
accepted wherever the command line takes a name or a path.
"""

from rlvr.api.evaluation import evaluate_model
from rlvr.api.grpo import GRPO

__all__ = ["GRPO", "evaluate_model"]
