"""rlvr.graphed: the static-cache decode step computes what the shrinking batch computes (here eagerly, on a CPU;
the CUDA graph replay of the same step is tests/gpu/test_cuda.py's), and its failures fall back in one line."""

import pytest
import torch

from rlvr import graphed
from rlvr.models import build_tiny_model
from rlvr.rollout import SamplingParams, generate
from rlvr.seeds import seed_of

PROMPTS = ["What is 3 + 4?", "Hi", "Count: 1 2 3", "a longer prompt than the others, by far"]
PARAMS = [SamplingParams(24, temperature=0.0), SamplingParams(24, temperature=1.0),
          SamplingParams(24, temperature=0.7, top_k=20, top_p=0.9)]


def tiny_qwen():
    """A tiny random Qwen2 (grouped-query attention, biases on q/k/v) with the tiny model's tokenizer."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    _, tokenizer = build_tiny_model(seed=0)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         attn_implementation="sdpa")
    return Qwen2ForCausalLM(config).eval(), tokenizer


MODELS = {"llama": lambda: [m.eval() if i == 0 else m for i, m in enumerate(build_tiny_model(seed=0))],
          "qwen2": tiny_qwen}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("params", PARAMS, ids=["greedy", "sampled", "top-k-top-p"])
def test_the_static_step_samples_what_the_shrinking_batch_samples(name, params):
    """Same tokens, stops and groups heard of; log-probs within rounding (the static attention runs over the
    masked, not yet written columns too, which changes the order of a sum)."""
    model, tok = MODELS[name]()
    ids = [tok(p).input_ids for p in PROMPTS]
    stops = [tok.eos_token_id, *tok.convert_tokens_to_ids(["e", "a"])]  # frequent: rows stop at different steps
    seeds = [seed_of(5, p, j) for p in range(len(ids)) for j in range(3)]
    heard = {True: [], False: []}
    out = {static: generate(model, ids, 3, params, stop_ids=stops, pad_id=tok.pad_token_id, seeds=seeds,
                            static=static, on_group_done=lambda p, i, n, s=static: heard[s].append((p, i, n)))
           for static in (False, True)}
    assert torch.equal(out[True].completion_ids, out[False].completion_ids)
    assert torch.equal(out[True].truncated, out[False].truncated)
    if params.temperature:  # (some rows stopped early, some ran to the end)
        assert 0 < int(out[True].truncated.sum()) < len(seeds)
    torch.testing.assert_close(out[True].logprobs, out[False].logprobs, atol=2e-5, rtol=0)
    assert [(p, i.tolist(), n.tolist()) for p, i, n in heard[True]] == \
        [(p, i.tolist(), n.tolist()) for p, i, n in heard[False]]


def test_a_completion_depends_on_its_seed_alone_in_the_static_step():
    model, tok = build_tiny_model(seed=0)
    ids = [tok(p).input_ids for p in PROMPTS]
    seeds = [seed_of(9, p, j) for p in range(len(ids)) for j in range(2)]
    run = lambda prompts, s: generate(model.eval(), prompts, 2, SamplingParams(16, temperature=1.0),  # noqa: E731
                                      stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, seeds=s, static=True)
    together = run(ids, seeds)
    for p in range(len(ids)):
        alone = run([ids[p]], seeds[2 * p:2 * p + 2])
        mine = together.completion_ids[2 * p:2 * p + 2]
        assert torch.equal(alone.completion_ids, mine[:, :alone.completion_ids.shape[1]])


def test_a_model_the_static_cache_cannot_hold_decodes_as_before(monkeypatch):
    model, tok = build_tiny_model(seed=0)
    model.config._attn_implementation = "eager"
    assert "not 'sdpa'" in graphed.static_refusal(model)
    monkeypatch.setattr(graphed.StaticDecoder, "__init__", lambda *a, **k: pytest.fail("the static decoder was used"))
    generate(model.eval(), [tok("Hi").input_ids], 2, SamplingParams(4, temperature=1.0), stop_ids=[],
             pad_id=tok.pad_token_id, seeds=[1, 2], static=True)
    sliding = build_tiny_model(seed=0)[0]
    sliding.config.layer_types = ["sliding_attention", "full_attention"]
    assert "sliding-window" in graphed.static_refusal(sliding)


def test_a_capture_that_fails_goes_on_eagerly_with_one_line(monkeypatch, capsys):
    """Graph capture out of memory (or refused): the step runs eagerly from then on, the tokens unchanged."""
    model, tok = build_tiny_model(seed=0)
    model.eval()
    ids = [tok(p).input_ids for p in PROMPTS]
    real_init = graphed.StaticDecoder.__init__

    def with_graphs(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.graphs = True  # (as on a GPU)

    def refuse(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(graphed.StaticDecoder, "__init__", with_graphs)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: None)
    monkeypatch.setattr(torch.cuda, "graph", refuse)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    kw = dict(stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, seeds=list(range(8)))
    static = generate(model, ids, 2, SamplingParams(12, temperature=1.0), static=True, **kw)
    assert torch.equal(static.completion_ids, generate(model, ids, 2, SamplingParams(12, temperature=1.0), **kw)
                       .completion_ids)
    lines = [line for line in capsys.readouterr().err.splitlines() if "graph" in line]
    assert lines == ["rlvr: decoding eagerly: the CUDA graph capture of the decode step failed (CUDA out of memory. "
                     "Tried to allocate 2.00 GiB)"]


def test_the_local_sampler_decodes_statically_only_on_a_gpu(monkeypatch):
    """On a CPU the shrinking batch stays (rows that finish cost nothing there); generation.cuda_graphs asks for
    the static step on a GPU only."""
    from rlvr.records import Example
    from rlvr.samplers import LocalSampler, Prompt, SampleRequest

    model, tok = build_tiny_model(seed=0)
    model.eval()
    used = []
    monkeypatch.setattr(graphed.StaticDecoder, "__init__", lambda *a, **k: used.append(1) or pytest.fail("static"))
    sampler = LocalSampler(lambda fn: fn(model), tok, cuda_graphs=True)
    sampler.sample([SampleRequest(Prompt(Example("Hi", {}, 0), "Hi"), (1, 2))], SamplingParams(4, temperature=1.0))
    assert used == []
