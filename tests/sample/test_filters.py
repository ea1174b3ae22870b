"""The rejection-sampling filters, one by one, on hand-made samples with hand-computed results."""

from collections import Counter

from rlvr.config import SampleConfig
from rlvr.evaluate.records import SampleRecord
from rlvr.sample.filters import (
    FILTERS,
    count_drops,
    filter_samples,
    first_occurrences,
    has_format,
    is_verified,
    normalise_whitespace,
    within_length,
)


def sample(text, strict=1.0, lenient=None, tokens=None, truncated=False):
    lenient = strict if lenient is None else lenient
    return SampleRecord(text=text, tokens=len(text) if tokens is None else tokens, truncated=truncated,
                        correct={"strict": strict, "lenient": lenient}, answer={})


def test_verdict_needs_exactly_one_from_the_chosen_verifier():
    right_leniently = sample("the answer is 3", strict=0.0, lenient=1.0)
    assert not is_verified(right_leniently, "strict") and is_verified(right_leniently, "lenient")
    assert not is_verified(sample("?", strict=None), "strict")  # a problem that cannot be checked keeps nothing


def test_length_bounds_are_inclusive_and_max_none_is_unbounded():
    assert [within_length(n, 3, 5) for n in (2, 3, 5, 6)] == [False, True, True, False]
    assert within_length(0, 0, None) and within_length(10**9, 0, None)


def test_format_uses_the_format_rewards():
    texts = [r"so \boxed{3}", r"\boxed{3} \boxed{4}", "<think>a</think><answer>3</answer>", "3"]
    assert has_format(texts, "boxed") == [True, False, False, False]
    assert has_format(texts, "think_answer") == [False, False, True, False]
    assert has_format(texts, "none") == [True] * 4


def test_dedupe_ignores_whitespace_runs_and_ends_but_not_case_or_missing_spaces():
    assert normalise_whitespace("\n x  =\t3 \n") == "x = 3"
    texts = ["x = 3", "  x =\n3", "x=3", "X = 3", "x = 3 "]
    assert first_occurrences(texts) == [True, False, True, True, False]


def test_filters_run_in_order_and_count_each_drop_once():
    samples = [
        sample("a", strict=0.0, truncated=True),  # truncated (also wrong): counted as truncated only
        sample("b", strict=0.0),  # incorrect
        sample("c" * 50),  # too long
        sample(r"\boxed{1}"),  # kept
        sample("no box"),  # format
        sample(r" \boxed{1} "),  # duplicate of the kept one
    ]
    kept, dropped = filter_samples(samples, SampleConfig(format="boxed", max_tokens=20))
    assert kept == [3]
    assert count_drops(dropped) == {"truncated": 1, "incorrect": 1, "length": 1, "format": 1, "duplicate": 1,
                                    "max_per_prompt": 0}


def test_a_verified_but_truncated_completion_is_dropped():
    kept, dropped = filter_samples([sample(r"\boxed{3}", truncated=True)], SampleConfig())
    assert kept == [] and dropped == Counter(truncated=1)


def test_dedupe_keeps_the_first_copy_and_can_be_turned_off():
    samples = [sample("  x = 3"), sample("x = 3"), sample("x =  3\n")]
    assert filter_samples(samples, SampleConfig())[0] == [0]
    assert filter_samples(samples, SampleConfig(dedupe=False, max_per_prompt=None))[0] == [0, 1, 2]


def test_max_per_prompt_keeps_the_first_in_sampling_order_not_the_shortest():
    samples = [sample("long " * 9), sample("s1"), sample("wrong", strict=0.0), sample("s2"), sample("s3")]
    kept, dropped = filter_samples(samples, SampleConfig(max_per_prompt=2))
    assert kept == [0, 1] and dropped == Counter(incorrect=1, max_per_prompt=2)
    assert filter_samples(samples, SampleConfig(max_per_prompt=None))[0] == [0, 1, 3, 4]


def test_lenient_verdict_and_min_tokens():
    samples = [sample("3", strict=0.0, lenient=1.0, tokens=1), sample("so 3", strict=0.0, lenient=1.0, tokens=4)]
    assert filter_samples(samples, SampleConfig())[0] == []
    kept, dropped = filter_samples(samples, SampleConfig(verdict="lenient", min_tokens=2))
    assert kept == [1] and dropped == Counter(length=1)


def test_count_drops_lists_every_filter():
    assert list(count_drops(Counter())) == list(FILTERS) and set(count_drops(Counter()).values()) == {0}


def test_keep_truncated_lets_verified_cut_completions_through():
    from rlvr.config import SampleConfig
    from rlvr.evaluate.records import SampleRecord
    from rlvr.sample.filters import filter_samples

    cut = SampleRecord("so 7", 8, True, {"strict": 1.0, "lenient": 1.0}, {})
    assert filter_samples([cut], SampleConfig())[0] == []
    assert filter_samples([cut], SampleConfig(keep_truncated=True))[0] == [0]
