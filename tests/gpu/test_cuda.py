"""The GPU path (marker `gpu`; skipped where torch sees no CUDA device): the rollout decoder, the
shared-prompt log-probs and a bf16 GRPO step on CUDA."""

import pytest
import torch

from rlvr.grpo.trainer import Trainer
from rlvr.logprobs import completion_logprobs
from rlvr.models import build_tiny_model, load_model
from rlvr.rollout import SamplingParams, generate, left_pad

from ..train.test_step import DIGITS, tiny_config

pytestmark = pytest.mark.gpu
PROMPTS = [[5, 9, 13, 2, 40], [7, 3], [11, 12, 13, 14, 15, 16, 17, 18], [30, 31, 32]]


def _cuda_tiny():
    model, tokenizer = build_tiny_model(seed=0)
    return model.eval().cuda(), tokenizer


def test_greedy_decoding_on_cuda_equals_hf_generate():
    model, tok = _cuda_tiny()
    ids, mask = left_pad(PROMPTS, pad_id=tok.pad_token_id)
    hf = model.generate(input_ids=ids.cuda(), attention_mask=mask.long().cuda(), max_new_tokens=32, min_new_tokens=32,
                        do_sample=False, pad_token_id=tok.pad_token_id)
    ours = generate(model, PROMPTS, 1, SamplingParams(32, temperature=0.0), stop_ids=[], pad_id=tok.pad_token_id)
    assert torch.equal(ours.completion_ids, hf[:, ids.shape[1]:].cpu())


def test_seeded_sampling_on_cuda_is_reproducible():
    model, tok = _cuda_tiny()
    run = lambda: generate(model, PROMPTS, 4, SamplingParams(24, temperature=1.0), stop_ids=[tok.eos_token_id],  # noqa: E731
                           pad_id=tok.pad_token_id, seeds=list(range(4 * len(PROMPTS))))
    a, b = run(), run()
    assert torch.equal(a.completion_ids, b.completion_ids)


def test_shared_prompt_logprobs_equal_unshared_on_cuda():
    model, tok = _cuda_tiny()
    out = generate(model, PROMPTS, 3, SamplingParams(16, temperature=1.0), stop_ids=[tok.eos_token_id],
                   pad_id=tok.pad_token_id, seeds=list(range(3 * len(PROMPTS))))
    rows = torch.arange(len(PROMPTS) * 3) // 3
    args = (model, out.prompt_ids, out.prompt_mask, rows, out.completion_ids, out.completion_mask)
    shared, plain = completion_logprobs(*args), completion_logprobs(*args, share_prompt=False)
    torch.testing.assert_close(shared.logprobs, plain.logprobs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(shared.logprobs.cpu(), out.logprobs, atol=1e-4, rtol=1e-4)


def test_bf16_grpo_steps_on_cuda(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, DIGITS))  # model.device=auto, model.dtype=auto -> cuda, bf16
    assert trainer.parts.device.type == "cuda" and trainer.parts.dtype == torch.bfloat16
    assert next(trainer.policy.model.parameters()).is_cuda
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}
    metrics = [trainer.step().metrics, trainer.step().metrics]
    assert all(not torch.equal(before[n], p) for n, p in trainer.policy.model.named_parameters())
    assert metrics[1]["kl"] > 0 and 0 < metrics[1]["memory/peak_gb"] < 1
    trainer.write_checkpoint(tmp_path / "checkpoint")  # what the run core saves: loadable on the CPU
    reloaded, _ = load_model(str(tmp_path / "checkpoint" / "model"))
    assert all(torch.equal(p.cpu(), q) for p, q in zip(trainer.policy.model.parameters(), reloaded.parameters()))


def test_graphed_decoding_on_cuda_equals_hf_generate_and_the_eager_batch(monkeypatch):
    """The decode step captured as a CUDA graph (rlvr.graphed) and replayed: greedy equals HF generate, seeded
    sampling equals the eager shrinking batch, and the graph was captured (not fallen back from)."""
    from rlvr import graphed

    captured = []
    real = graphed.StaticDecoder._capture
    monkeypatch.setattr(graphed.StaticDecoder, "_capture", lambda self: real(self) or captured.append(self.graph))
    model, tok = _cuda_tiny()
    ids, mask = left_pad(PROMPTS, pad_id=tok.pad_token_id)
    hf = model.generate(input_ids=ids.cuda(), attention_mask=mask.long().cuda(), max_new_tokens=32, min_new_tokens=32,
                        do_sample=False, pad_token_id=tok.pad_token_id)
    ours = generate(model, PROMPTS, 1, SamplingParams(32, temperature=0.0), stop_ids=[], pad_id=tok.pad_token_id,
                    static=True)
    assert torch.equal(ours.completion_ids, hf[:, ids.shape[1]:].cpu())
    kw = dict(stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, seeds=list(range(4 * len(PROMPTS))))
    eager = generate(model, PROMPTS, 4, SamplingParams(24, temperature=1.0), **kw)
    graphs = generate(model, PROMPTS, 4, SamplingParams(24, temperature=1.0), static=True, **kw)
    assert torch.equal(graphs.completion_ids, eager.completion_ids)
    assert len(captured) == 2 and all(g is not None for g in captured)
