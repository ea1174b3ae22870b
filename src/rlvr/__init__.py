"""rlvr: GRPO with verifiable rewards.

The training step follows the data flow of the folder tree::

    prompts ─▶ rollout ─▶ rewards ─▶ advantages ─▶ logprobs ─▶ loss (+KL) ─▶ optimizer step
     data/     rollout.py  rewards/   advantages.py logprobs.py losses.py, kl.py  train/
"""

__version__ = "0.1.0"
