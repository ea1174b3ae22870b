"""Length shaping: a soft penalty for completions that run into the token limit.

DAPO (Yu et al. 2025, §3.4, eq. 13) found that scoring a truncated completion like a wrong one
injects noise: the reasoning may have been right and merely long. Its "soft overlong punishment"
warns first and punishes at the limit:

    0                                    if |y| <= L_max - L_cache
    ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max   (0 down to -1)
    -1                                   if |y| > L_max

with L_max = `max_tokens` (usually the sampling limit, max_new_tokens) and L_cache =
`cache_tokens`, the width of the ramp (DAPO: 20,480 and 4,096). The other DAPO remedy, leaving
truncated completions out of the loss, is the trainer's ``algorithm.mask_truncated``.
"""

from __future__ import annotations

from typing import Any

from rlvr.errors import UserError


def overlong_penalty(
    completions: list[Any],
    completion_ids: list[list[int]],
    max_tokens: int | None = None,
    cache_tokens: int | None = None,
    **kwargs: Any,
) -> list[float]:
    """DAPO's soft overlong punishment of each completion, from its length in tokens (see above).

    >>> overlong_penalty(["a"] * 5, [[0] * n for n in (10, 12, 14, 16, 20)], max_tokens=16, cache_tokens=4)
    [0.0, 0.0, -0.5, -1.0, -1.0]
    """
    limit, width = _checked(max_tokens, cache_tokens)
    start = limit - width
    scores = []
    for ids in completion_ids:
        length = len(ids)
        if length <= start:
            scores.append(0.0)
        elif length <= limit:  # width > 0 here: the ramp is not empty
            scores.append((start - length) / width)
        else:
            scores.append(-1.0)
    return scores


def _checked(max_tokens: int | None, cache_tokens: int | None) -> tuple[int, int]:
    """(max_tokens, cache_tokens) once both are set and consistent; a UserError says how to set them."""
    if max_tokens is None or cache_tokens is None:
        raise UserError(
            "overlong_penalty needs max_tokens and cache_tokens: give them as the reward's parameters "
            "in the config (max_tokens = the sampling limit; DAPO used cache_tokens = 1/5 of it)"
        )
    if not (isinstance(max_tokens, int) and isinstance(cache_tokens, int) and 0 <= cache_tokens <= max_tokens):
        raise UserError(
            f"overlong_penalty: need whole numbers 0 <= cache_tokens <= max_tokens, got max_tokens={max_tokens!r}, "
            f"cache_tokens={cache_tokens!r}"
        )
    return max_tokens, cache_tokens


def environment_reward(completions: list[Any], env_reward: list[float | None] | None = None,
                       **kwargs: Any) -> list[float | None]:
    """The reward a multi-turn rollout's environment gave its trajectory (rlvr.envs; e.g. guess_number's);
    a trajectory the environment did not finish (out of turns or tokens) scores 0.

    >>> environment_reward(["a", "b"], env_reward=[0.75, None])
    [0.75, 0.0]
    """
    if env_reward is None:
        raise UserError("the environment_reward reward needs multi-turn rollouts: set environment.name "
                        "(python_tool, guess_number or your own) in the config")
    return [0.0 if r is None else float(r) for r in env_reward]


def agent_reward(completions: list[Any], env_reward: list[float | None] | None = None,
                 **kwargs: Any) -> list[float | None]:
    """What a harness rollout's agent function returned (rlvr.harness): the reward of a run that talks to the
    policy through its own loop; None (the run failed, or the agent left it unscored) stays unscored.

    >>> agent_reward(["a", "b"], env_reward=[0.75, None])
    [0.75, None]
    """
    if env_reward is None:
        raise UserError("the agent_reward reward needs harness rollouts: set environment.name to an agent "
                        "function, 'path/to/file.py:fn' with fn(link, row)")
    return [None if r is None else float(r) for r in env_reward]


def agent_passed(completions: list[Any], env_reward: list[float | None] | None = None, pass_threshold: float = 0.5,
                 **kwargs: Any) -> list[float | None]:
    """1.0 where a harness rollout's reward (what its agent or its verifiers rubric gave: `agent_reward`) reaches
    `pass_threshold`, else 0.0; None (unscored) stays None. How `rlvr eval` judges a verifiers environment's runs.

    >>> agent_passed(["a", "b", "c"], env_reward=[1.0, 0.25, None])
    [1.0, 0.0, None]
    """
    return [None if r is None else float(r >= pass_threshold) for r in agent_reward(completions, env_reward)]
