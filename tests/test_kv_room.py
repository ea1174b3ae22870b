"""rlvr.kv_room: decoding over a cache with room gives what torch.cat's cache gave, writing each step in place."""

import pytest
import torch
from transformers import DynamicCache

import rlvr.rollout
from rlvr.kv_room import RoomyLayer, with_room
from rlvr.rollout import SamplingParams, generate

PROMPTS = ["What is 3 + 4?", "Hi", "a longer prompt than the others, by far"]


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16-autocast"])
def test_the_rollout_samples_what_the_growing_cache_sampled(tiny, monkeypatch, autocast):
    """Bitwise: the same tokens and log-probs, rows leaving the batch as they stop (under autocast the prompts'
    keys are bf16 and the steps' too: the buffers keep what the steps bring)."""
    model, tok = tiny
    ids = [tok(p).input_ids for p in PROMPTS]
    stop = tok.convert_tokens_to_ids("e")  # a frequent character: rows stop at different steps

    def sample():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return generate(model, ids, 4, SamplingParams(max_new_tokens=20, temperature=1.0), stop_ids=[stop],
                            pad_id=tok.pad_token_id, seeds=list(range(12)))

    roomy = sample()
    monkeypatch.setattr(rlvr.rollout, "with_room", lambda cache, room: cache)
    growing = sample()
    assert torch.equal(roomy.completion_ids, growing.completion_ids)
    assert torch.equal(roomy.logprobs, growing.logprobs)
    assert 0 < int(roomy.truncated.sum()) < len(roomy.truncated)  # (some rows left early, some ran to the end)


def test_each_step_writes_into_the_same_buffers_and_rows_leave():
    cache = DynamicCache()
    prompt = torch.randn(2, 1, 3, 4, dtype=torch.bfloat16)
    cache.update(prompt, -prompt, 0)
    (layer,) = with_room(cache, 5).layers
    assert isinstance(layer, RoomyLayer)
    steps = [torch.randn(2, 1, 1, 4) for _ in range(4)]
    keys, _ = layer.update(steps[0], -steps[0])
    storage = keys.untyped_storage().data_ptr()
    for step in steps[1:]:
        keys, values = layer.update(step, -step)
        assert keys.untyped_storage().data_ptr() == storage  # (in place: no copy of the cache per step)
    expected = torch.cat([prompt.float(), *steps], dim=-2)  # (as torch.cat promotes bf16 and fp32)
    assert torch.equal(keys, expected) and torch.equal(values, -expected) and layer.get_seq_length() == 7
    layer.batch_select_indices(torch.tensor([1]))
    keys, _ = layer.update(steps[0][1:], steps[0][1:])
    assert torch.equal(keys, torch.cat([expected[1:], steps[0][1:]], dim=-2))
