"""Harness rollouts: the policy behind an OpenAI-compatible endpoint that records what it samples.

An agent loop of any kind (a verifiers environment, an OpenEnv client, a plain `openai` client) talks to the
policy through `Endpoint`, one base URL per rollout; every completion it is served is a `Sampler.complete` draw
whose exact prompt ids, sampled ids and log-probs the rollout's `Recorder` keeps, so that training uses the
tokens that were sampled and never a re-rendering of the conversation.

    endpoint.py   the loopback HTTP server: /r/<key>/v1/chat/completions, /completions, /models
    batcher.py    one engine thread: the requests of every live rollout, sampled together
    recorder.py   one rollout's turns: prompt ids, sampled ids, log-probs, seeds
    template.py   messages (and tools) to prompt ids by the chat template; sampled ids to an OpenAI message
"""

from rlvr.harness.endpoint import Endpoint, RolloutKey
from rlvr.harness.recorder import Recorder, Turn

__all__ = ["Endpoint", "Recorder", "RolloutKey", "Turn"]
