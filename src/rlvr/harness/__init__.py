"""Harness rollouts: the policy behind an OpenAI-compatible endpoint that records what it samples.

An agent loop of any kind (a verifiers environment, an OpenEnv client, a plain `openai` client) talks to the
policy through `Endpoint`, one base URL per rollout; every completion it is served is a `Sampler.complete` draw
whose exact prompt ids, sampled ids and log-probs the rollout's `Recorder` keeps, so that training uses the
tokens that were sampled and never a re-rendering of the conversation.

    sampler.py    the run's engine running an agent (`environment.name: file.py:fn`): what training samples;
                  over_episodes: the engine, an environment's conversations over it, or an agent's runs
    rollout.py    a step's runs as one Rollout record: their turns as rows (several to a rewritten trajectory)
    group.py      G runs of an agent function `fn(link, row)`, each a rollout of its own, under a deadline
    endpoint.py   the loopback HTTP server: /r/<key>/v1/chat/completions, /completions, /models
    batcher.py    one engine thread: the requests of every live rollout, sampled together
    recorder.py   one rollout's turns: prompt ids, sampled ids, log-probs, seeds
    splice.py     a request continuing a recorded turn: that turn's ids verbatim, the new messages bridged
    rows.py       a rollout's turns as training rows, by ids

Messages to prompt ids and sampled text to OpenAI messages with tool calls: rlvr.envs.template. verifiers
environments run as agents here: rlvr.adapters.
"""

from rlvr.harness.endpoint import Endpoint, RolloutKey
from rlvr.harness.recorder import Recorder, Turn

__all__ = ["Endpoint", "Recorder", "RolloutKey", "Turn"]
