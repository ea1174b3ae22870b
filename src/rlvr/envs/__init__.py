"""Environments a rollout talks to: the model writes a message, the environment answers, until done.

    base.py         the protocol (reset → first messages; step(model message) → Reply) and Reply
    python_tool.py  `python_tool`: fenced ```python blocks run in the sandbox, their output comes back
    guess.py        `guess_number`: a game with feedback (higher / lower), scored by the environment
    loading.py      an environment by name, `module:Class` or `file.py:Class`
    rollout.py      conversations: the policy and its environments, turn by turn, as token transcripts, decoded
                    with each row's KV cache kept (on a model lent in this process)
    turn_by_turn.py the same conversations over an engine's `complete` (token ids only: vLLM)
    sampling.py     G conversations per prompt as one Rollout (what training and evaluation sample)
    driven.py       EnvironmentSampler: the run's engine, each sample a conversation (over either driver)
"""

from rlvr.envs.base import Environment, Reply
from rlvr.envs.loading import ENVIRONMENTS, load_environment

__all__ = ["ENVIRONMENTS", "Environment", "Reply", "load_environment"]
