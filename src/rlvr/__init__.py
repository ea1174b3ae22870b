"""rlvr: GRPO with verifiable rewards.

The training step follows the data flow of the folder tree::

    prompts ─▶ rollout ─▶ rewards ─▶ advantages ─▶ logprobs ─▶ loss (+KL) ─▶ optimizer step
     data/     rollout.py  rewards/   advantages.py logprobs.py losses.py, kl.py  train/
"""

import os

__version__ = "0.1.0"

# Idle OpenMP threads sleep instead of spinning. Beside another busy process a spinning thread burns
# the CPU the others need: a GRPO step took 4x longer with torch's default and about as long alone
# (bench/threads_under_load.py, docs/performance.md). OpenMP reads this once, when torch is first
# imported, so it applies when rlvr is imported first (always, from the command line); a value you
# set yourself wins (OMP_WAIT_POLICY=ACTIVE for torch's default).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
