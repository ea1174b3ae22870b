"""A Sampler whose completions are harness rollouts: what `environment.name: file.py:fn` makes of the run's sampler.

`sample(requests, params)` runs the agent function G times per prompt against an endpoint over the inner
sampler (rlvr's engine or vLLM) and returns their turns as one Rollout (rlvr.harness.rollout); everything else
(the weights, `complete`, closing) is the inner sampler's. So training, held-out evaluation and `rlvr eval`
sample through an agent exactly as they sample one completion per prompt.

A run whose agent fails (raises, returns no number, never calls the endpoint, runs past environment.timeout_s)
is unscored, said in env/errors; when more than half of a call's runs fail, the agent is broken rather than
unlucky: that is one line naming the first failure (the step abandoned, the last checkpoint kept).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from rlvr.config import EnvironmentConfig
from rlvr.data.lengths import context_length
from rlvr.envs.driven import EnvironmentSampler
from rlvr.errors import UserError
from rlvr.harness.group import Agent
from rlvr.harness.rollout import sample_harness
from rlvr.records import Rollout
from rlvr.rewards.batch import completion_token_ids
from rlvr.rollout import SamplingParams
from rlvr.samplers.protocol import GroupDone, Sampler, SampleRequest, Wrapper


def over_episodes(engine: Sampler, environment: EnvironmentConfig, tokenizer: Any, model: Any,
                  agent: Callable[..., Any] | Agent | None = None,
                  make_env: Callable[[], Any] | None = None) -> Sampler:
    """What samples a run's episodes over `engine`: the engine itself without `environment.name`; the runs of
    `agent` (the agent function or adapter that name loads: rlvr.envs.load_agent), their prompts held to
    `model`'s context; else conversations with the environment it names (`make_env`, else loaded by name:
    rlvr.envs.driven)."""
    if agent is not None:
        return HarnessSampler(engine, tokenizer, agent, environment, context_length(model))
    if not environment.name:
        return engine
    return EnvironmentSampler(engine, environment, tokenizer, make_env)


class HarnessSampler(Wrapper):
    """`inner`, sampling through the agent function `agent` (see the module docstring)."""

    def __init__(self, inner: Sampler, tokenizer: Any, agent: Callable[..., Any] | Agent,
                 environment: EnvironmentConfig, context: int | None = None) -> None:
        """`context`: the model's, in tokens (a longer prompt is refused, as vLLM refuses it)."""
        super().__init__(inner)
        self.tokenizer, self.agent, self.environment = tokenizer, agent, environment
        self.context, self.said = context, set[str]()  # (what the endpoint said once: once a run, not a step)
        # (an adapter names itself, as its runs' errors do: "verifiers environment '...'")
        self.name = getattr(agent, "name", None) or f"agent function '{environment.name}'"

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams,
               on_group_done: GroupDone | None = None) -> Rollout:
        examples = [r.prompt.example for r in requests]
        out = sample_harness(self.agent, self.inner, self.tokenizer, examples, [list(r.seeds) for r in requests],
                             params, self.environment.timeout_s, self.name, context=self.context,
                             strict=self.environment.strict_requests, said=self.said)
        assert out.env_info is not None and out.transcripts is not None  # (a harness rollout has both)
        failed = [t[-1]["content"] for t, info in zip(out.transcripts, out.env_info) if info["errors"]]
        if failed and 2 * len(failed) > len(out.env_info):
            first = failed[0].removeprefix(f"{self.name} ")
            raise UserError(f"{len(failed)} of {len(out.env_info)} runs of the {self.name} failed (the first {first}): "
                            "fix the agent (more than half failing is not bad luck)")
        if on_group_done is not None:
            g, ids = out.group_size, completion_token_ids(out)
            for p in range(out.num_prompts):
                on_group_done(p, out.completions[p * g:(p + 1) * g], ids[p * g:(p + 1) * g])
        return dataclasses.replace(out, version=self.inner.version)
