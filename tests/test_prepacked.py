"""Decoding on a CPU with the linear weights packed for oneDNN (rlvr.prepacked): the same function as the layers'
own up to rounding (in fp32; under bf16, the function autocast computes up to bf16's rounding), only where it
pays, and the layers' own forward back afterwards; both engines decode with it (rlvr.rollout.generate, and the
multi-turn engine, rlvr.envs.rollout.converse)."""

import pytest
import torch

import rlvr.prepacked as prepacked
from rlvr.models.devices import BF16_UNITS_ENV
from rlvr.models.loading import build_tiny_model
from rlvr.prepacked import MIN_STEPS, packed_linears
from rlvr.rollout import SamplingParams, generate

from .envs.test_converse import Scripted
from .envs.test_converse import run as converse

pytestmark = pytest.mark.skipif(not prepacked.onednn_linear(), reason="this torch has no oneDNN linear")
BF16 = torch.autocast("cpu", dtype=torch.bfloat16)
onednn_bf16 = pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(),
                                 reason="this CPU has no oneDNN bf16 (its kernels need AVX-512)")


@pytest.fixture
def model():
    return build_tiny_model(seed=0)[0].eval()


def linears(model):
    return [m for m in model.modules() if type(m) is torch.nn.Linear]


def own_forwards(model):
    return all("forward" not in m.__dict__ for m in linears(model))


@torch.no_grad()
def test_packed_layers_compute_the_same_logits_up_to_rounding(model):
    ids = torch.randint(0, model.config.vocab_size, (3, 7))
    plain = model(input_ids=ids).logits
    with packed_linears(model, MIN_STEPS) as packed:
        assert packed and not own_forwards(model)
        logits = model(input_ids=ids).logits
    assert own_forwards(model)
    torch.testing.assert_close(logits, plain, rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_the_weights_are_packed_on_entry(model):
    ids = torch.randint(0, model.config.vocab_size, (2, 5))
    with packed_linears(model, MIN_STEPS):
        before = model(input_ids=ids).logits
        for m in linears(model):  # an update during decoding is not seen: the packed copy is of the entry's weights
            if m.weight is not model.get_input_embeddings().weight:  # (the tied output layer's is the embedding's)
                m.weight.add_(1.0)
        torch.testing.assert_close(model(input_ids=ids).logits, before, rtol=0, atol=0)
    assert not torch.allclose(model(input_ids=ids).logits, before)


def test_the_layers_own_forward_is_back_after_an_error(model):
    with pytest.raises(RuntimeError, match="mid-decoding"), packed_linears(model, MIN_STEPS):
        assert not own_forwards(model)
        raise RuntimeError("mid-decoding")
    assert own_forwards(model)


@pytest.mark.parametrize("why", ["short", "autocast without bf16 units", "bf16 weights", "no onednn"])
def test_nothing_is_packed_where_it_does_not_pay(model, why, monkeypatch):
    steps = MIN_STEPS - 1 if why == "short" else MIN_STEPS
    if why == "bf16 weights":
        model.to(torch.bfloat16)
    if why == "no onednn":
        monkeypatch.setattr(prepacked, "onednn_linear", lambda: False)
    monkeypatch.setenv(BF16_UNITS_ENV, "none")  # (as the suite sets it)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=why == "autocast without bf16 units"), \
            packed_linears(model, steps) as packed:
        assert not packed and own_forwards(model)
        assert torch.is_autocast_enabled("cpu") == (why == "autocast without bf16 units")


@onednn_bf16
@torch.no_grad()
def test_under_bf16_autocast_the_layers_multiply_in_bf16_and_the_rest_runs_in_fp32(model, monkeypatch):
    """Where the CPU has bf16 units: the weights packed in bf16 and autocast off within (the norms, attention and
    the output in fp32), the logits as far from fp32's as autocast's are; autocast and the layers' forward back
    after."""
    monkeypatch.setenv(BF16_UNITS_ENV, "avx512_bf16")
    ids = torch.randint(0, model.config.vocab_size, (3, 7))
    plain = model(input_ids=ids).logits
    with BF16:
        autocast = model(input_ids=ids).logits.float()
        with packed_linears(model, MIN_STEPS) as packed:
            assert packed and not own_forwards(model) and not torch.is_autocast_enabled("cpu")
            logits = model(input_ids=ids).logits
        assert torch.is_autocast_enabled("cpu") and own_forwards(model)
    assert logits.dtype == torch.float32  # off fp32's function by bf16's rounding, as far as autocast is off it
    assert 1e-4 < (logits - plain).abs().max() < 2 * (autocast - plain).abs().max()
    with BF16, packed_linears(model, MIN_STEPS - 1) as packed:  # (a short decoding: autocast as it was)
        assert not packed and torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize("new_tokens", [MIN_STEPS - 1, MIN_STEPS])
def test_generate_decodes_with_packed_weights_where_it_pays(model, new_tokens, monkeypatch):
    packed = []
    monkeypatch.setattr(prepacked, "packed_forward", lambda w, b, dtype: packed.append(dtype) or (lambda x: x @ w.T))
    out = generate(model, [[5, 6, 7]], 2, SamplingParams(max_new_tokens=new_tokens), stop_ids=[], pad_id=0,
                   seeds=[1, 2])
    assert out.completion_ids.shape == (2, new_tokens)
    assert packed == ([torch.float32] * len(linears(model)) if new_tokens >= MIN_STEPS else [])
    assert own_forwards(model)


@onednn_bf16
def test_generate_under_bf16_decodes_with_bf16_packed_weights_and_samples_autocasts_tokens(model, monkeypatch):
    """The prompts' pass under autocast, its bf16 keys and values joining the fp32 cache of the packed steps; the
    log-probs sampled are those of autocast's forward over the whole sequence, up to bf16 rounding."""
    from rlvr.logprobs import completion_logprobs

    monkeypatch.setenv(BF16_UNITS_ENV, "avx512_bf16")
    spy = []
    monkeypatch.setattr(prepacked, "packed_forward",
                        lambda w, b, dtype, real=prepacked.packed_forward: spy.append(dtype) or real(w, b, dtype))
    with torch.no_grad(), BF16:
        out = generate(model, [[5, 6, 7], [8]], 3, SamplingParams(max_new_tokens=MIN_STEPS), stop_ids=[],
                       pad_id=0, seeds=list(range(6)))
        rows = torch.arange(6) // 3
        again = completion_logprobs(model, out.prompt_ids, out.prompt_mask, rows, out.completion_ids,
                                    out.completion_mask).logprobs.float()
    assert spy == [torch.bfloat16] * len(linears(model)) and own_forwards(model)
    torch.testing.assert_close(out.logprobs, again * out.completion_mask, rtol=0, atol=0.1)


@pytest.mark.parametrize("new_tokens", [MIN_STEPS - 1, MIN_STEPS])
def test_conversations_decode_with_packed_weights_where_it_pays(tiny, new_tokens, monkeypatch):
    """Packed once for a whole multi-turn rollout, the replies' prefills included; the layers' own forward back
    after it."""
    packed = []
    monkeypatch.setattr(prepacked, "packed_forward",
                        lambda w, b, dtype: packed.append(w) or (lambda x: torch.nn.functional.linear(x, w, b)))
    # (the random model's messages are cut at the budget: replied to all the same)
    trajectories = converse(tiny, [Scripted(["Again.", "Again."]) for _ in range(2)], max_turns=3,
                            new_tokens=new_tokens, reply_to_cut=True)
    assert all(t.info["turns"] == 3 for t in trajectories)  # (the environment replied to each message)
    assert len(packed) == (len(linears(tiny[0])) if new_tokens >= MIN_STEPS else 0)
    assert own_forwards(tiny[0])
