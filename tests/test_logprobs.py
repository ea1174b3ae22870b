"""rlvr.logprobs: the shared-prompt forward equals the plain one, in values and gradients."""

from functools import partial

import pytest
import torch

import rlvr.logprobs
from rlvr.logprobs import PolicyModule, completion_logprobs, length_buckets, selective_logprobs
from rlvr.rollout import SamplingParams, generate


def test_selective_logprobs_equal_full_log_softmax():
    g = torch.Generator().manual_seed(0)
    hidden, weight = torch.randn(37, 8, generator=g), torch.randn(50, 8, generator=g)
    targets = torch.randint(0, 50, (37,), generator=g)
    for temperature in (0.7, 2.0):
        lp, ent = selective_logprobs(hidden, weight, targets, temperature=temperature, chunk=5)
        full = torch.log_softmax(hidden @ weight.T / temperature, -1)
        assert torch.allclose(lp, full.gather(-1, targets[:, None]).squeeze(-1), atol=1e-5)
        assert torch.allclose(ent, -(full.exp() * full).sum(-1), atol=1e-4)
    plain = torch.log_softmax(hidden @ weight.T, -1).gather(-1, targets[:, None]).squeeze(-1)
    assert torch.allclose(selective_logprobs(hidden, weight, targets)[0], plain, atol=1e-5)  # (T = 1 by default)


def test_a_logit_exactly_at_its_support_floor_stays_in_the_support():
    """The floor is the lowest logit the sampler kept: a token whose logit equals it was in the support."""
    g = torch.Generator().manual_seed(3)
    hidden, weight = torch.randn(4, 6, generator=g), torch.randn(10, 6, generator=g)
    logits = hidden @ weight.T  # (the same product selective_logprobs forms, all rows in one chunk)
    targets = logits.argmax(-1)
    floors = logits.sort(-1, descending=True).values[:, 2]  # top-3 kept: the target, two more
    kept = logits.masked_fill(logits < floors[:, None], float("-inf"))
    want = torch.log_softmax(kept, -1).gather(-1, targets[:, None]).squeeze(-1)
    lp, _ = selective_logprobs(hidden, weight, targets, floors=floors)
    torch.testing.assert_close(lp, want)


@pytest.mark.parametrize("keep", [False, True])
def test_selective_logprobs_gradients_equal_autograd_through_log_softmax(keep):
    """The hand-written backward against autograd on the full [T, V] log-softmax, with an uneven
    upstream gradient, a temperature, and chunks that do not divide the tokens; on the softmax kept from the
    forward and on the logits recomputed."""
    g = torch.Generator().manual_seed(1)
    for temperature in (1.0, 0.6, 1.5):
        hidden = torch.randn(23, 6, generator=g, dtype=torch.float64, requires_grad=True)
        weight = torch.randn(31, 6, generator=g, dtype=torch.float64, requires_grad=True)
        targets = torch.randint(0, 31, (23,), generator=g)
        upstream = torch.randn(23, generator=g, dtype=torch.float64)
        lp, ent = selective_logprobs(hidden, weight, targets, temperature=temperature, chunk=4, keep=keep)
        assert not ent.requires_grad
        ours = torch.autograd.grad((lp * upstream).sum(), (hidden, weight))
        full = torch.log_softmax(hidden @ weight.T / temperature, -1).gather(-1, targets[:, None]).squeeze(-1)
        theirs = torch.autograd.grad((full * upstream).sum(), (hidden, weight))
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("keep", [False, True])
def test_each_input_gets_its_gradient_when_only_it_requires_one(keep):
    """A frozen output layer (LoRA) or frozen hidden states: the backward computes the gradient of the input that
    asks for one, and it is autograd's."""
    g = torch.Generator().manual_seed(2)
    hidden0, weight0 = torch.randn(9, 5, generator=g, dtype=torch.float64), torch.randn(11, 5, generator=g,
                                                                                         dtype=torch.float64)
    targets = torch.randint(0, 11, (9,), generator=g)
    for trained in (0, 1):
        inputs = [hidden0.clone().requires_grad_(trained == 0), weight0.clone().requires_grad_(trained == 1)]
        lp, _ = selective_logprobs(*inputs, targets, temperature=0.8, chunk=4, keep=keep)
        (ours,) = torch.autograd.grad(lp.sum(), inputs[trained])
        full = torch.log_softmax(inputs[0] @ inputs[1].T / 0.8, -1).gather(-1, targets[:, None]).sum()
        (theirs,) = torch.autograd.grad(full, inputs[trained])
        torch.testing.assert_close(ours, theirs, atol=1e-10, rtol=1e-8)


def test_the_kept_softmax_gives_the_recomputed_gradients_bit_for_bit_without_a_second_product(monkeypatch):
    """In fp32, the gradient on the softmax kept from the forward is the one the backward recomputes (the same
    product of the same inputs), and the kept way forms no logits in the backward: one product per chunk in
    all, against two."""
    g = torch.Generator().manual_seed(4)
    hidden0, weight0 = torch.randn(23, 16, generator=g), torch.randn(97, 16, generator=g)
    targets, upstream = torch.randint(0, 97, (23,), generator=g), torch.randn(23, generator=g)
    floors = (hidden0 @ weight0.T / 0.7).median(-1).values
    products, logits_of = [], rlvr.logprobs._logits
    monkeypatch.setattr(rlvr.logprobs, "_logits", lambda *a: products.append(1) or logits_of(*a))
    grads = {}
    for keep in (False, True):
        hidden, weight = hidden0.clone().requires_grad_(), weight0.clone().requires_grad_()
        lp, _ = selective_logprobs(hidden, weight, targets, temperature=0.7, chunk=5, floors=floors, keep=keep)
        forward = len(products)
        grads[keep] = torch.autograd.grad((lp * upstream).sum(), (hidden, weight))
        assert len(products) - forward == (0 if keep else 5)  # (23 tokens in chunks of 5)
        products.clear()
    for kept, recomputed in zip(grads[True], grads[False]):
        assert torch.equal(kept, recomputed)



def test_a_second_backward_through_a_kept_softmax_is_refused_not_wrong():
    """The backward turns the kept softmax into the gradient in place: torch's version check refuses a second."""
    hidden = torch.randn(6, 4, requires_grad=True)
    lp, _ = selective_logprobs(hidden, torch.randn(9, 4), torch.arange(6), keep=True)
    lp.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        lp.sum().backward()


def test_the_update_keeps_the_softmax_unless_checkpointing(tiny, monkeypatch):
    """completion_logprobs keeps the output layer's softmax for the backward, and recomputes it under activation
    checkpointing (memory first); without gradients nothing is kept."""
    model, _ = tiny
    kept = []
    real = rlvr.logprobs.selective_logprobs

    def spy(*args, keep=False, **kwargs):
        kept.append(keep and torch.is_grad_enabled())
        return real(*args, keep=keep, **kwargs)
    monkeypatch.setattr(rlvr.logprobs, "selective_logprobs", spy)
    rows = batch(7)
    completion_logprobs(model, *rows).logprobs.sum().backward()
    with torch.no_grad():
        completion_logprobs(model, *rows)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    completion_logprobs(model, *rows).logprobs.sum().backward()
    assert kept == [True, False, False]


def test_a_bucket_ends_where_a_row_is_more_than_twice_its_shortest_and_min_gain_longer():
    assert length_buckets([20, 40]) == [[0, 1]]  # twice, not more
    assert length_buckets([20, 41]) == [[0], [1]]
    assert length_buckets([20, 39]) == [[0, 1]]
    assert length_buckets([5, 11]) == [[0, 1]]  # more than twice, but 6 tokens longer: under min_gain (16)
    assert length_buckets([10, 26]) == [[0], [1]]  # 16 longer: min_gain exactly
    assert length_buckets([10, 25]) == [[0, 1]]
    assert length_buckets([10, 25], min_gain=15) == [[0], [1]]
    assert length_buckets([5, 60, 61]) == [[0], [1, 2]]  # (a row joins the last bucket,
    assert length_buckets([20, 39, 41]) == [[0, 1], [2]]  # measured against its shortest row, not its longest)
    assert length_buckets([5, 30, 50]) == [[0], [1, 2]]  # (the last bucket's shortest, not the first's)


def test_length_buckets_cover_every_row_once():
    lengths = [3, 50, 4, 20, 7, 1, 64, 5]
    buckets = length_buckets(lengths)
    assert sorted(i for b in buckets for i in b) == list(range(len(lengths)))
    for b in buckets:
        assert [lengths[i] for i in b] == sorted(lengths[i] for i in b)


def test_shared_prompt_gives_the_same_loss_and_gradients(tiny):
    model, tok = tiny
    model.train()
    prompts = [tok(p).input_ids for p in ["What is 3 + 4?", "Hi", "a much longer prompt here"]]
    stops = [tok.convert_tokens_to_ids(c) for c in "aeiouxyz"]
    out = generate(model, prompts, 4, SamplingParams(max_new_tokens=30, temperature=1.0), stop_ids=stops,
                   pad_id=tok.pad_token_id, seeds=list(range(12)))
    assert len(set(out.completion_mask.sum(-1).tolist())) > 2  # varied lengths exercise the buckets
    row_prompt = torch.arange(3).repeat_interleave(4)
    weights = torch.randn(out.completion_ids.shape, generator=torch.Generator().manual_seed(1))
    results = {}
    for share in (True, False):
        model.zero_grad()
        stats = completion_logprobs(model, out.prompt_ids, out.prompt_mask, row_prompt, out.completion_ids,
                                    out.completion_mask, 1.0, share_prompt=share)
        (stats.logprobs * weights).sum().backward()
        results[share] = (stats.logprobs.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    assert torch.allclose(results[True][0], results[False][0], atol=1e-5)
    for name, grad in results[True][1].items():
        # fp32 sums in another order: the embedding gradient reaches |g| ~ 34 here, so 1e-5 of its scale
        assert torch.allclose(grad, results[False][1][name], rtol=0,
                              atol=1e-5 * max(1.0, float(grad.abs().max()))), name


@pytest.mark.parametrize("keep", [False, True])
def test_log_probs_over_the_kept_support_in_value_gradient_and_entropy(keep):
    """With support floors (top-k / top-p), the log-softmax runs over the logits at or above each position's
    floor, the target always kept: against autograd on the masked full log-softmax, in fp64."""
    g = torch.Generator().manual_seed(2)
    hidden = torch.randn(19, 6, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(31, 6, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 31, (19,), generator=g)
    upstream = torch.randn(19, generator=g, dtype=torch.float64)
    scaled = (hidden @ weight.T / 0.7).detach()
    top = scaled.topk(6, dim=-1).values  # top-5 kept at each position, the floor halfway to the 6th as the sampler
    floors = (top[:, 4] + top[:, 5]) / 2  # puts it (on the 5th itself, chunked logits 1 ulp off can drop it)...
    floors[3] = float("-inf")  # ...but the whole vocabulary at one
    kept = (scaled >= floors[:, None]).scatter(-1, targets[:, None], True)  # (a target below the floor stays)
    lp, ent = selective_logprobs(hidden, weight, targets, temperature=0.7, chunk=4, floors=floors, keep=keep)
    masked = torch.log_softmax((hidden @ weight.T / 0.7).masked_fill(~kept, float("-inf")), -1)
    torch.testing.assert_close(lp, masked.gather(-1, targets[:, None]).squeeze(-1), atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(ent, -(masked.exp() * masked.nan_to_num(neginf=0.0)).sum(-1), atol=1e-10, rtol=1e-8)
    ours = torch.autograd.grad((lp * upstream).sum(), (hidden, weight))
    theirs = torch.autograd.grad((masked.gather(-1, targets[:, None]).squeeze(-1) * upstream).sum(), (hidden, weight))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)
    assert not torch.allclose(lp, selective_logprobs(hidden, weight, targets, temperature=0.7)[0])  # (it mattered)


def test_truncated_sampling_log_probs_equal_a_fresh_forward_over_the_same_support(tiny):
    """What is sampled is what is trained: top-k and top-p draws, recomputed by the trainer's forward with the
    sampler's support floors, give the sampler's log-probs; over the whole vocabulary they would not."""
    from rlvr.seeds import seed_of

    model, tok = tiny
    ids = [tok(p, add_special_tokens=True).input_ids for p in ("What is 2+2?", "Say 7.", "12 * 3 =")]
    row_prompt = torch.arange(3).repeat_interleave(4)
    for params in (SamplingParams(16, temperature=0.7, top_k=20), SamplingParams(16, temperature=1.0, top_p=0.9)):
        out = generate(model, ids, 4, params, stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id,
                       seeds=[seed_of(5, i) for i in range(12)])
        with torch.no_grad():
            stats = completion_logprobs(model, out.prompt_ids, out.prompt_mask, row_prompt, out.completion_ids,
                                        out.completion_mask, params.temperature, support_floors=out.support_floors)
            whole = completion_logprobs(model, out.prompt_ids, out.prompt_mask, row_prompt, out.completion_ids,
                                        out.completion_mask, params.temperature)
        mask = out.completion_mask
        assert float((stats.logprobs - out.logprobs)[mask].abs().max()) < 1e-5
        assert float((whole.logprobs - out.logprobs)[mask].abs().max()) > 1e-2


def test_a_shared_prompts_gradient_is_the_same_on_every_pass(tiny):
    """Rows sharing a long prompt: their gradients through it are summed in a fixed order, so the same batch gives
    the same gradient bit for bit (a resumed run equals the unbroken one); indexing's backward did not, on a CPU."""
    model, tok = tiny
    prompts = [tok("a long prompt " * 12).input_ids, tok("another long one " * 11).input_ids]
    out = generate(model, prompts, 4, SamplingParams(max_new_tokens=70, temperature=1.0),
                   stop_ids=[tok.convert_tokens_to_ids("q")], pad_id=tok.pad_token_id, seeds=list(range(8)))
    row_prompt = torch.arange(2).repeat_interleave(4)
    grads = []
    for _ in range(3):
        model.zero_grad()
        stats = completion_logprobs(model, out.prompt_ids, out.prompt_mask, row_prompt, out.completion_ids,
                                    out.completion_mask, 1.0, share_prompt=True)
        stats.logprobs.sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    assert all(torch.equal(g[n], grads[0][n]) for g in grads[1:] for n in g)


def plain_logprobs(model, prompt_ids, prompt_mask, completion_ids, completion_mask):
    """log π of each completion token from one full forward over prompt + completion and a full log-softmax."""
    from rlvr.rollout import positions

    ids, attention = torch.cat([prompt_ids, completion_ids], 1), torch.cat([prompt_mask, completion_mask], 1)
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions(attention)).logits
    lp = prompt_ids.shape[1]
    logp = torch.log_softmax(logits[:, lp - 1 : lp - 1 + completion_ids.shape[1]].float(), -1)
    return logp.gather(-1, completion_ids[..., None]).squeeze(-1) * completion_mask


def batch(prompt_width):
    """Two left-padded prompts `prompt_width` wide, three completions (one of no tokens) with a row per prompt."""
    g = torch.Generator().manual_seed(prompt_width)
    prompt_ids = torch.randint(5, 40, (2, prompt_width), generator=g)
    prompt_mask = torch.ones(2, prompt_width, dtype=torch.bool)
    prompt_mask[1, :2] = False
    completion_ids = torch.randint(5, 40, (3, 24), generator=g)
    completion_mask = torch.zeros(3, 24, dtype=torch.bool)
    completion_mask[0, :24], completion_mask[1, :20] = True, True  # (row 2: no tokens, a bucket of its own)
    return prompt_ids, prompt_mask, torch.tensor([0, 1, 1]), completion_ids, completion_mask


def test_both_ways_give_a_full_forwards_log_probs_at_odd_and_even_prompt_widths(tiny):
    """The hidden state at position Lp − 1 + t predicts completion token t, whatever the prompt's padded width;
    a row without tokens gets none (and costs no forward of its own)."""
    model, _ = tiny
    for width in (6, 7):
        prompt_ids, prompt_mask, row_prompt, completion_ids, completion_mask = batch(width)
        with torch.no_grad():
            want = plain_logprobs(model, prompt_ids[row_prompt], prompt_mask[row_prompt], completion_ids,
                                  completion_mask)
            for share in (True, False):
                got = completion_logprobs(model, prompt_ids, prompt_mask, row_prompt, completion_ids,
                                          completion_mask, share_prompt=share).logprobs
                torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        assert not got[2].any()


def forward_widths(model, way, *batch):
    """The [rows, tokens] of each forward of the backbone while `way(*batch)` computes the log-probs."""
    widths = []

    def record(_, args, kwargs):
        widths.append(tuple(kwargs["input_ids"].shape))

    hook = model.model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        with torch.no_grad():
            way(*batch)
    finally:
        hook.remove()
    return widths


def test_by_default_the_prompts_are_computed_once_not_once_per_completion(tiny):
    """The two prompts once, then the completions of 24 and 20 tokens (one bucket) over their cache; the row of
    no tokens costs no forward."""
    model, _ = tiny
    for way in (partial(completion_logprobs, model), PolicyModule(model)):  # (the module DDP and FSDP wrap)
        assert forward_widths(model, way, *batch(6)) == [(2, 6), (2, 23)]
    with torch.no_grad():  # (and the module's defaults are completion_logprobs': T = 1)
        module, function = PolicyModule(model)(*batch(6)), completion_logprobs(model, *batch(6))
    torch.testing.assert_close(module.logprobs, function.logprobs, atol=0, rtol=0)


def test_one_token_completions_are_predicted_by_the_prompts_forward_alone(tiny):
    model, _ = tiny
    prompt_ids, prompt_mask, row_prompt, completion_ids, completion_mask = batch(6)
    completion_mask[:2, 1:] = False  # one token each, and the row of none
    assert forward_widths(model, partial(completion_logprobs, model), prompt_ids, prompt_mask, row_prompt,
                          completion_ids, completion_mask) == [(2, 6)]
    with torch.no_grad():
        want = plain_logprobs(model, prompt_ids[row_prompt], prompt_mask[row_prompt], completion_ids, completion_mask)
        got = completion_logprobs(model, prompt_ids, prompt_mask, row_prompt, completion_ids, completion_mask)
    torch.testing.assert_close(got.logprobs, want, atol=1e-5, rtol=0)


def test_rows_without_tokens_give_log_probs_a_backward_runs_through_with_zero_gradients(tiny):
    """A micro-batch of empty rows only (a failed agent run): its loss is of the graph, so its backward runs (a
    data-parallel rank all-reduces in it) and gives every parameter a gradient of zero, both ways."""
    model, _ = tiny
    prompt_ids, prompt_mask, row_prompt, completion_ids, _ = batch(6)
    for share in (True, False):
        model.zero_grad(set_to_none=True)
        stats = completion_logprobs(model, prompt_ids, prompt_mask, row_prompt, completion_ids[:, :1],
                                    torch.zeros(3, 1, dtype=torch.bool), share_prompt=share)
        assert stats.logprobs.requires_grad and not stats.logprobs.any()
        stats.logprobs.sum().backward()
        assert all(p.grad is not None and not p.grad.any() for p in model.parameters())


def test_under_gradient_checkpointing_the_prompt_is_computed_per_completion_with_the_same_values(tiny):
    """HF computes no cache under checkpointing in training: the plain way, whatever share_prompt says."""
    model, _ = tiny
    prompt_ids, prompt_mask, row_prompt, completion_ids, completion_mask = batch(7)
    with torch.no_grad():
        want = plain_logprobs(model, prompt_ids[row_prompt], prompt_mask[row_prompt], completion_ids, completion_mask)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    got = completion_logprobs(model, prompt_ids, prompt_mask, row_prompt, completion_ids, completion_mask).logprobs
    torch.testing.assert_close(got.detach(), want, atol=1e-5, rtol=0)
