"""What the harness tests share."""

import pytest
import torch

from rlvr.harness import Endpoint
from rlvr.models import build_tiny_model
from rlvr.rollout import SamplingParams
from rlvr.run.policy import Policy
from rlvr.samplers import LocalSampler
from rlvr.samplers import local as local_sampler


def serve_tiny(params):
    """An endpoint over the tiny model (seed 0) drawing under `params`."""
    model, tokenizer = build_tiny_model(seed=0)
    policy = Policy(model, device=torch.device("cpu"), dtype=torch.float32)
    return Endpoint(LocalSampler(policy.decoding, tokenizer, weights=policy.named_weights), tokenizer, params)


@pytest.fixture
def endpoint():
    """An endpoint over the tiny model: 12 tokens a completion at temperature 1."""
    served = serve_tiny(SamplingParams(12, temperature=1.0))
    yield served
    served.close()


@pytest.fixture()
def calls_the_tool(monkeypatch):
    """The random tiny model never writes a tool call: the first message of each conversation (a prompt with no
    call in it yet) is replaced by one, with made-up log-probs, so that the ToolEnv's tool runs."""
    real = local_sampler.LocalSampler.complete
    text = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'

    def complete(self, jobs, params):
        ids = [*self.tokenizer(text, add_special_tokens=False).input_ids, self.tokenizer.eos_token_id]
        return [s if "<tool_call>" in self.tokenizer.decode(job.ids) else type(s)(ids, [-1.0] * len(ids), True)
                for job, s in zip(jobs, real(self, jobs, params))]

    monkeypatch.setattr(local_sampler.LocalSampler, "complete", complete)


@pytest.fixture
def calls_then_answers(monkeypatch):
    """The random tiny model writes a tool call first, then, once its call is in its prompt (the tool's result
    after it), "5" and its end of turn (made-up log-probs): what an agent needs to finish."""
    real = local_sampler.LocalSampler.complete

    def complete(self, jobs, params):
        call = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
        out = []
        for job, s in zip(jobs, real(self, jobs, params)):
            text = "5" if "<tool_call>" in self.tokenizer.decode(job.ids) else call
            ids = [*self.tokenizer(text, add_special_tokens=False).input_ids, self.tokenizer.eos_token_id]
            out.append(type(s)(ids, [-1.0] * len(ids), True))
        return out

    monkeypatch.setattr(local_sampler.LocalSampler, "complete", complete)
