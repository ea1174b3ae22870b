"""A Sampler whose completions are conversations with an environment: what `environment.name` (an environment
rlvr drives, not an agent that runs its own loop: rlvr.harness) makes of the run's engine.

The engines know only token ids (rlvr.samplers); the conversations are driven here, over any of them:

- an engine that lends its model in this process (`decoding`: rlvr's own, on the policy's weights or a copy)
  has them decoded together with each row's KV cache kept for the whole conversation (rlvr.envs.rollout), a
  message ended at the engine's stop tokens for that model (`stop_ids_for`);
- any other (vLLM, colocated or as a server) writes each turn's messages with one `complete` call
  (rlvr.envs.turn_by_turn), ended at its `stop_ids`.

Either way each of the G samples of a prompt is one conversation with a fresh environment, recorded as one
Rollout (rlvr.envs.sampling); the weights, their version, `complete` and closing stay the engine's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rlvr.config import EnvironmentConfig
from rlvr.envs.base import Environment
from rlvr.envs.loading import load_environment
from rlvr.records import Rollout
from rlvr.rollout import SamplingParams
from rlvr.samplers.protocol import GroupDone, Sampler, SampleRequest, Wrapper, group_size


class EnvironmentSampler(Wrapper):
    """`inner`, each sample a conversation with the environment `environment` names (`make_env`: how to make
    one, else loaded by name), its messages ended at the engine's stop tokens."""

    def __init__(self, inner: Sampler, environment: EnvironmentConfig, tokenizer: Any,
                 make_env: Callable[[], Environment] | None = None) -> None:
        super().__init__(inner)
        self.environment, self.tokenizer = environment, tokenizer
        if make_env is None:
            if not environment.name:
                raise ValueError("an EnvironmentSampler needs an environment: environment.name or make_env")
            make_env = load_environment(environment.name, **environment.params)
        self.make_env = make_env

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams,
               on_group_done: GroupDone | None = None) -> Rollout:
        """(`on_group_done` is not called: a conversation's rewards come with its end, scored after the batch.)"""
        engine: Any = self.inner  # (what an engine of either kind offers beyond the Sampler protocol)
        decoding = getattr(engine, "decoding", None)
        if decoding is None:
            from rlvr.envs.turn_by_turn import sample_conversations as turn_by_turn

            return turn_by_turn(engine.complete, self.tokenizer, engine.stop_ids, self.environment, self.make_env,
                                requests, params)
        from rlvr.envs.sampling import sample_conversations

        env, make_env, g = self.environment, self.make_env, group_size(requests)
        examples, messages = [r.prompt.example for r in requests], [r.prompt.messages or [] for r in requests]
        seeds = [s for r in requests for s in r.seeds]
        return decoding(lambda model: sample_conversations(  # type: ignore[no-any-return]
            model, self.tokenizer, examples, messages, g, params, make_env=make_env, max_turns=env.max_turns,
            max_tokens=env.max_tokens, stop_ids=engine.stop_ids_for(model), seeds=seeds, rejoin_after=env.rejoin_after,
            timeout_s=env.timeout_s, reply_to_cut=env.reply_to_cut, max_sessions=env.max_sessions))
