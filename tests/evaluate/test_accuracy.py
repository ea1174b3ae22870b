"""rlvr.evaluate.accuracy: interval arithmetic and the held-out evaluation on the tiny model."""

import random

import pytest

from rlvr.evaluate.accuracy import evaluate_accuracy, paired_gain_interval, wilson_interval
from rlvr.records import Example
from rlvr.samplers import LocalSampler, Prompt


def test_wilson_by_hand():
    i = wilson_interval(8, 10)
    # p = 0.8, z = 1.96: centre (0.8 + 0.19208) / 1.38416, half 1.96·sqrt(0.016 + 0.0096040) / 1.38416
    assert (i.low, i.high) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 20).low == 0.0 and wilson_interval(20, 20).high == 1.0


def test_newcombe_paired_degenerate_case_by_hand():
    g = paired_gain_interval([0] * 33, [1] * 33)
    w = wilson_interval(33, 33)
    assert g.mean == 1.0 and g.high == 1.0
    assert g.low == pytest.approx(1 - (2 * (1 - w.low) ** 2) ** 0.5)  # φ = 0, both margins at their Wilson bounds


@pytest.mark.parametrize("p_before, p_after", [(0.3, 0.5), (0.6, 0.6), (0.1, 0.9)])
def test_paired_interval_covers_the_truth_about_95_percent(p_before, p_after):
    rng = random.Random(0)
    n, trials, covered = 60, 400, 0
    for _ in range(trials):
        before = [int(rng.random() < p_before) for _ in range(n)]
        after = [int(rng.random() < p_after) for _ in range(n)]
        g = paired_gain_interval(before, after)
        assert g.low <= g.mean <= g.high
        covered += g.low <= p_after - p_before <= g.high
    assert 0.91 <= covered / trials <= 0.99


def test_non_binary_scores_use_the_normal_interval():
    g = paired_gain_interval([0.5, 0.25, 0.0, 0.5], [1.0, 0.75, 0.5, 0.5])
    assert g.mean == pytest.approx(0.375) and g.low < g.mean < g.high


def test_evaluate_accuracy_on_tiny(tiny):
    model, tok = tiny
    examples = [Example(f"What is {a} + {a}?", {"answer": str(2 * a)}, a) for a in range(5)]

    def strict(completions, answer, **kw):
        return [1.0 if c.endswith(a) else 0.0 for c, a in zip(completions, answer)]

    def lenient(completions, answer, **kw):
        return [1.0 if a in c else 0.0 for c, a in zip(completions, answer)]

    sampler = LocalSampler(lambda fn: fn(model), tok, add_special_tokens=True)
    result = evaluate_accuracy(sampler, [Prompt(e, e.prompt) for e in examples], strict=strict, lenient=lenient,
                               max_new_tokens=6, batch_prompts=2)
    assert len(result.completions) == 5 and len(result.strict_correct) == 5
    assert result.strict.mean == sum(result.strict_correct) / 5
    assert all(strict <= lenient for strict, lenient in zip(result.strict_correct, result.lenient_correct))
    assert not model.training


def test_mean_interval_is_a_normal_interval_over_problems_clipped_to_0_1():
    from rlvr.evaluate.accuracy import mean_interval

    values = [0.25, 0.5, 0.75, 1.0, 0.0]
    mean = sum(values) / 5
    sd = (sum((v - mean) ** 2 for v in values) / 4) ** 0.5
    i = mean_interval(values)
    assert i.mean == pytest.approx(0.5)
    assert i.low == pytest.approx(0.5 - 1.959963984540054 * sd / 5 ** 0.5)
    assert i.high == pytest.approx(0.5 + 1.959963984540054 * sd / 5 ** 0.5)
    clipped = mean_interval([1.0, 1.0, 0.75])
    assert clipped.high == 1.0 and clipped.low < clipped.mean < 1.0
    assert mean_interval([0.0, 0.0]).low == 0.0 and mean_interval([0.0, 0.0]).high == 0.0


class ScriptedSampler:
    """A sampler whose greedy answers are scripted: right for the even rows, wrong (but holding the answer
    unboxed, which only the lenient verifier accepts) for rows divisible by 3, a plain wrong box otherwise."""

    version, holds_copy = 0, False

    def __init__(self, tokenizer):
        self.tokenizer, self.seen = tokenizer, []

    def answer(self, example):
        gold = example.columns["answer"]
        if example.index % 2 == 0:
            return f"\\boxed{{{gold}}}"
        return f"It is {gold}." if example.index % 3 == 0 else "\\boxed{-1}"

    def sample(self, requests, params, on_group_done=None):
        from rlvr.samplers.protocol import Sampled
        from rlvr.samplers.vllm import to_rollout

        self.seen += [(r.prompt.example.index, r.seeds, params.temperature) for r in requests]
        prompts = [self.tokenizer(r.prompt.text).input_ids for r in requests]
        answers = [self.tokenizer(self.answer(r.prompt.example)).input_ids for r in requests]
        out = [Sampled(ids, [0.0] * len(ids), stopped=True) for ids in answers]
        return to_rollout([r.prompt.example for r in requests], prompts, out, 1, self.tokenizer)


def test_held_out_verdicts_are_the_verifiers_on_each_answer(tiny):
    """Right answers count as right: forcing every verdict to 0 (or to 1) in evaluate_accuracy fails here."""
    from rlvr.rewards.math import math_accuracy, math_accuracy_lenient
    from rlvr.seeds import seed_of

    _, tok = tiny
    examples = [Example(f"What is {a} + {a}?", {"answer": str(2 * a)}, a) for a in range(7)]
    sampler = ScriptedSampler(tok)
    result = evaluate_accuracy(sampler, [Prompt(e, e.prompt) for e in examples], strict=math_accuracy,
                               lenient=math_accuracy_lenient, max_new_tokens=8, batch_prompts=3, seed=5)
    assert result.strict_correct == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert result.lenient_correct == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    assert result.strict.mean == pytest.approx(4 / 7) and result.lenient.mean == pytest.approx(5 / 7)
    assert result.completions[3] == "It is 6."
    # greedy, one completion per prompt, its seed that of (seed, row) alone
    assert sampler.seen == [(a, (seed_of(5, a),), 0.0) for a in range(7)]
