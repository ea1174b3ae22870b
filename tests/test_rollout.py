"""rlvr.rollout: exact agreement with HF generate, recorded log-probs, stopping, sampling filters."""

import torch

from rlvr.logprobs import completion_logprobs
from rlvr.records import Example
from rlvr.rollout import SamplingParams, generate, left_pad, rollout, sample_next, token_at
from rlvr.seeds import seed_of, uniforms

PROMPTS = ["What is 3 + 4?", "Hi", "Count: 1 2 3", "a longer prompt than the others, by far"]


def _ids(tokenizer):
    return [tokenizer(p).input_ids for p in PROMPTS]


def test_greedy_matches_hf_generate(tiny):
    model, tok = tiny
    ids = _ids(tok)
    stop = tok.convert_tokens_to_ids("e")  # a frequent character, so some rows stop early
    ours = generate(model, ids, 1, SamplingParams(max_new_tokens=24, temperature=0), stop_ids=[stop],
                    pad_id=tok.pad_token_id)
    pid, pmask = left_pad(ids, tok.pad_token_id)
    hf = model.generate(input_ids=pid, attention_mask=pmask.long(), max_new_tokens=24, do_sample=False,
                        eos_token_id=stop, pad_token_id=tok.pad_token_id)[:, pid.shape[1]:]
    stopped = 0
    for row in range(len(ids)):
        mine = ours.completion_ids[row][ours.completion_mask[row]].tolist()
        theirs = hf[row].tolist()
        if stop in theirs:
            theirs = theirs[: theirs.index(stop) + 1]
            stopped += 1
        assert mine == theirs
        assert bool(ours.truncated[row]) == (stop not in theirs)
    assert stopped >= 1


def test_sampling_logprobs_equal_a_fresh_forward(tiny):
    model, tok = tiny
    out = generate(model, _ids(tok), 3, SamplingParams(max_new_tokens=16, temperature=0.8),
                   stop_ids=[tok.convert_tokens_to_ids("a")], pad_id=tok.pad_token_id, seeds=_seeds(3))
    row_prompt = torch.arange(len(PROMPTS)).repeat_interleave(3)
    with torch.no_grad():
        stats = completion_logprobs(model, out.prompt_ids, out.prompt_mask, row_prompt, out.completion_ids,
                                    out.completion_mask, 0.8)
    assert torch.allclose(stats.logprobs, out.logprobs, atol=1e-5)
    assert (out.logprobs[~out.completion_mask] == 0).all()


def _seeds(group_size, prompts=len(PROMPTS), run=7):
    return [seed_of(run, p, j) for p in range(prompts) for j in range(group_size)]


def test_seeded_sampling_is_reproducible_and_groups_differ(tiny):
    model, tok = tiny
    params = SamplingParams(max_new_tokens=12, temperature=1.0)
    a = generate(model, _ids(tok), 4, params, stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, seeds=_seeds(4))
    b = generate(model, _ids(tok), 4, params, stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, seeds=_seeds(4))
    assert torch.equal(a.completion_ids, b.completion_ids)
    assert len({tuple(r.tolist()) for r in a.completion_ids[:4]}) > 1  # G samples of one prompt differ


def test_a_completion_depends_on_its_seed_alone_not_on_its_batch_mates(tiny):
    """Row seeds (rlvr.seeds): a prompt's completions are the same sampled with the others or alone, and in
    another order, wherever its logits are (here: one prompt at a time against all together)."""
    model, tok = tiny
    params = SamplingParams(max_new_tokens=12, temperature=1.0)
    ids, seeds = _ids(tok), _seeds(3)
    together = generate(model, ids, 3, params, stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id, seeds=seeds)
    for p in reversed(range(len(ids))):
        alone = generate(model, [ids[p]], 3, params, stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id,
                         seeds=seeds[3 * p:3 * p + 3])
        mine = together.completion_ids[3 * p:3 * p + 3]
        assert torch.equal(alone.completion_ids, mine[:, :alone.completion_ids.shape[1]])


def test_inverse_cdf_sampling_draws_from_the_distribution():
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2, 0.0]]).repeat(40_000, 1)
    tokens = token_at(probs, uniforms([seed_of(0, i) for i in range(40_000)], 0)[:, None])
    share = torch.bincount(tokens, minlength=6).double() / len(tokens)
    assert share[[0, 2, 5]].sum() == 0  # probability 0: never drawn
    assert torch.allclose(share[[1, 3, 4]], torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64), atol=0.01)
    # the ends of [0, 1): the first and the last token of positive probability, never a zero after them
    below_one = torch.tensor([[0.0], [1 - 2**-53]], dtype=torch.float64)
    assert token_at(probs[:2], below_one).tolist() == [1, 4]
    # a tiny probability after large ones keeps its share (the cumulative sum is fp64)
    tiny = torch.tensor([[1 - 1e-9, 1e-9]])
    assert token_at(tiny, torch.tensor([[1 - 5e-10]], dtype=torch.float64)).tolist() == [1]


def test_top_k_and_top_p_restrict_the_support_and_the_log_probs_are_of_what_was_kept():
    logits = torch.tensor([[5.0, 4.0, 3.0, -10.0]]).repeat(2000, 1)
    u = uniforms([seed_of(1, i) for i in range(2000)], 0)
    tokens, logprobs, floors = sample_next(logits, SamplingParams(1, temperature=1.0, top_k=2), u)
    assert set(tokens.tolist()) == {0, 1} and (floors == 3.5).all()  # (halfway between the kept and the cut)
    kept = torch.log_softmax(logits[0, :2], -1)  # renormalised over the two tokens kept
    assert torch.allclose(logprobs, kept[tokens])
    # probabilities ≈ 0.665, 0.245, 0.09: top_p 0.7 keeps the first two tokens only
    tokens, logprobs, floors = sample_next(logits / 2, SamplingParams(1, temperature=0.5, top_p=0.7), u)
    assert set(tokens.tolist()) == {0, 1} and (floors == 3.5).all()  # (in the scaled logits: logits / T)
    assert torch.allclose(logprobs, kept[tokens])
    tokens, logprobs, floors = sample_next(logits, SamplingParams(1, temperature=1.0), u)  # nothing cut
    assert (floors == float("-inf")).all() and torch.allclose(logprobs, torch.log_softmax(logits[0], -1)[tokens])


def test_rollout_record(tiny):
    model, tok = tiny
    examples = [Example(p, {"answer": "7"}, i) for i, p in enumerate(PROMPTS[:2])]
    r = rollout(model, tok, examples, PROMPTS[:2], 3, SamplingParams(max_new_tokens=8, temperature=1.0),
                seeds=_seeds(3, prompts=2), add_special_tokens=True)
    assert r.completion_ids.shape[0] == 6 and len(r.completions) == 6 and r.group_size == 3
    assert r.lengths.max().item() <= 8
    assert (r.truncated == (r.lengths == 8) & ~torch.isin(r.completion_ids[:, -1],
                                                          torch.tensor([tok.eos_token_id]))).all()
    assert r.completions[0] == tok.decode(r.completion_ids[0][r.completion_mask[0]], skip_special_tokens=True)
