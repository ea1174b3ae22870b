"""rlvr.decoder: the rollout engine's own Llama-family forward against HF's."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from rlvr.decoder import fast_decoder
from rlvr.rollout import SamplingParams, generate, left_pad

PROMPTS = [[5, 9, 13, 2, 40], [7, 3], [11, 12, 13, 14, 15, 16, 17, 18], [30, 31, 32]]


def _llama(seed: int = 0, **extra) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True, **extra)
    return LlamaForCausalLM(config).eval()


def _qwen2(seed: int = 0) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=512)
    return Qwen2ForCausalLM(config).eval()


def _both(model, group_size, params, stop_ids, seed=3):
    """The same sampling through HF's forward and through the decoder, from the same seed."""
    run = lambda decoder: generate(model, PROMPTS, group_size, params, stop_ids=stop_ids, pad_id=0,  # noqa: E731
                                   generator=torch.Generator().manual_seed(seed), decoder=decoder)
    return run(None), run("auto")


@pytest.mark.parametrize("build", [_llama, _qwen2], ids=["llama", "qwen2-with-qkv-bias"])
def test_prefill_and_step_logits_equal_hf(build):
    model = build()
    decoder = fast_decoder(model)
    assert decoder is not None
    ids, mask = left_pad(PROMPTS, pad_id=0)
    state, logits = decoder.prefill(ids, mask, group_size=2)
    hf = model(input_ids=ids, attention_mask=mask.long(), position_ids=(mask.long().cumsum(-1) - 1).clamp(min=0)).logits[:, -1]
    torch.testing.assert_close(logits, hf, atol=1e-5, rtol=1e-5)
    # one step for every row of every group, against HF over prompt + that token
    tokens = torch.arange(len(PROMPTS) * 2) + 20
    pos = mask.sum(-1).repeat_interleave(2)
    step_logits = decoder.step(state, tokens, pos)
    full_ids = torch.cat([ids.repeat_interleave(2, 0), tokens[:, None]], 1)
    full_mask = torch.cat([mask.repeat_interleave(2, 0), torch.ones(len(tokens), 1, dtype=torch.bool)], 1)
    hf_step = model(input_ids=full_ids, attention_mask=full_mask.long(), position_ids=(full_mask.long().cumsum(-1) - 1).clamp(min=0)).logits[:, -1]
    torch.testing.assert_close(step_logits, hf_step, atol=1e-5, rtol=1e-5)


def test_greedy_tokens_equal_hf_generate():
    model = _llama()
    ids, mask = left_pad(PROMPTS, pad_id=0)
    hf = model.generate(input_ids=ids, attention_mask=mask.long(), max_new_tokens=40, min_new_tokens=40, do_sample=False, pad_token_id=0)
    ours = generate(model, PROMPTS, 1, SamplingParams(40, temperature=0.0), stop_ids=[], pad_id=0, decoder="auto")
    assert torch.equal(ours.completion_ids, hf[:, ids.shape[1]:])


@pytest.mark.parametrize("build", [_llama, _qwen2], ids=["llama", "qwen2"])
def test_sampled_groups_equal_the_hf_path(build):
    """Seeded sampling with stop tokens (rows leave the batch at different steps) and a length past
    the cache's first capacity (it grows): same tokens, same log-probs, same truncation."""
    model = build()
    params = SamplingParams(150, temperature=1.0, top_p=0.9)
    a, b = _both(model, 3, params, stop_ids=[4])
    assert a.completion_mask.sum(1).unique().numel() > 2, "rows should finish at different steps"
    assert int(a.completion_mask.sum(1).max()) > 64, "some row should outgrow the first cache capacity"
    assert torch.equal(a.completion_ids, b.completion_ids)
    assert torch.equal(a.truncated, b.truncated)
    torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-5, rtol=0)


def test_one_prompt_many_completions_and_many_prompts_one_completion():
    model = _llama(seed=1)
    for group in (1, 8):
        a, b = _both(model, group, SamplingParams(30, temperature=1.0), stop_ids=[4])
        assert torch.equal(a.completion_ids, b.completion_ids)


def test_decoder_reads_live_weights():
    """After an optimizer step the next rollout samples from the updated policy (no stale copy)."""
    model = _llama()
    decoder = fast_decoder(model)
    ids, mask = left_pad(PROMPTS, pad_id=0)
    before = decoder.prefill(ids, mask, 1)[1]
    with torch.no_grad():
        model.lm_head.weight.mul_(2.0)
    after = decoder.prefill(ids, mask, 1)[1]
    hf = model(input_ids=ids, attention_mask=mask.long(), position_ids=(mask.long().cumsum(-1) - 1).clamp(min=0)).logits[:, -1]
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, hf, atol=1e-5, rtol=1e-5)


def test_unsupported_models_fall_back_to_hf():
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=128)).eval()
    assert fast_decoder(gpt2) is None
    assert fast_decoder(_llama(hidden_act="gelu")) is None
    out = generate(gpt2, PROMPTS, 2, SamplingParams(8, temperature=1.0), stop_ids=[], pad_id=0, generator=torch.Generator().manual_seed(0))
    assert out.completion_ids.shape == (8, 8)
