"""rlvr: GRPO with verifiable rewards.

The training step follows the data flow of the folder tree::

    prompts ─▶ rollout ─▶ rewards ─▶ advantages ─▶ logprobs ─▶ loss (+KL) ─▶ optimizer step
     data/     rollout.py  rewards/   advantages.py logprobs.py losses.py, kl.py  rl/
"""

import os

__version__ = "0.1.0"

# Idle OpenMP threads spin briefly, then sleep. Torch's default (libgomp: 300,000 spins) made a step of the
# default job over 6x slower beside another busy process, since spinning threads hold the cores the others
# need; sleeping at once (OMP_WAIT_POLICY=PASSIVE) made a step of the benchmark job 40% slower alone, since
# decoding is many small parallel operations and each one then waits for threads to wake. 10,000 spins
# first (GOMP_SPINCOUNT, read by libgomp, torch's OpenMP on Linux; other runtimes sleep at once) kept
# most of both (bench/threads_under_load.py, docs/performance.md). OpenMP reads these once, when torch is
# first imported, so they apply when rlvr is imported first (always, from the command line); if you set
# either yourself, rlvr sets neither (OMP_WAIT_POLICY=ACTIVE for spinning throughout).
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ["GOMP_SPINCOUNT"] = "10000"

# The front door, imported on first use (`rlvr --help` and the light commands start without torch):
#   GRPO, evaluate_model   rlvr.api: training and evaluation from Python (and SFT, RewardModel, PPO)
#   UserError              rlvr.errors: what they raise for a mistake the caller can fix
#   TrainConfig, EvalConfig, load_config   rlvr.config: the one typed config
#   Environment, Reply     rlvr.envs: a multi-turn environment of your own
__all__ = ["GRPO", "PPO", "SFT", "Environment", "EvalConfig", "Reply", "RewardModel", "TrainConfig", "UserError",
           "__version__", "evaluate_model", "load_config"]


def __getattr__(name: str) -> object:
    if name == "UserError":
        from rlvr.errors import UserError

        return UserError
    if name in ("GRPO", "PPO", "SFT", "RewardModel", "evaluate_model"):
        from rlvr import api

        return getattr(api, name)
    if name in ("TrainConfig", "EvalConfig", "load_config"):
        from rlvr import config

        return getattr(config, name)
    if name in ("Environment", "Reply"):
        from rlvr import envs

        return getattr(envs, name)
    raise AttributeError(f"module 'rlvr' has no attribute {name!r}")
