"""string_check and text_similarity, with hand-computed values."""

import math

import pytest

from rlvr.errors import UserError
from rlvr.rewards import GradeResult
from rlvr.rewards.graders import bleu, build_grader, fuzzy_match, rouge_l, rouge_n

from .conftest import grade


def string_check(operation, reference="{{ item.answer }}", **extra):
    return build_grader({"type": "string_check", "reference": reference, "operation": operation, **extra})


@pytest.mark.parametrize(
    "operation, expected",
    [
        # completions:  "Paris"  "paris"  "It is Paris."  "Lyon"
        ("eq", [1.0, 0.0, 0.0, 0.0]),
        ("ne", [0.0, 1.0, 1.0, 1.0]),
        ("like", [1.0, 0.0, 1.0, 0.0]),
        ("ilike", [1.0, 1.0, 1.0, 0.0]),
    ],
)
def test_string_check_operations(operation, expected):
    results = grade(string_check(operation), ["Paris", "paris", "It is Paris.", "Lyon"], [{"answer": "Paris"}] * 4)
    assert [r.reward for r in results] == expected


def test_string_check_reasons_and_custom_input():
    grader = string_check("eq", reference="{{ item.label }}", input="{{ item.prediction }}")
    items = [{"label": "cat", "prediction": "cat"}, {"label": "cat", "prediction": "dog"}]
    results = grade(grader, ["ignored", "ignored"], items)
    assert results == [GradeResult(1.0, "input equals 'cat'"), GradeResult(0.0, "input does not equal 'cat'")]


def test_string_check_row_without_the_field_is_not_scored():
    assert grade(string_check("eq"), ["x"], [{"question": "?"}]) == [GradeResult(None, "the row has no field 'answer'")]


def test_string_check_eq_is_exact():
    # OpenAI's semantics: no stripping, so a trailing newline is a different string.
    assert grade(string_check("eq"), ["Paris\n"], [{"answer": "Paris"}])[0].reward == 0.0


def test_fuzzy_match_by_hand():
    # kitten / sitting: matching blocks "itt" + "n" = 4 characters; ratio = 2 * 4 / (6 + 7).
    assert fuzzy_match("kitten", "sitting") == pytest.approx(8 / 13)
    assert fuzzy_match("abc", "abc") == 1.0
    assert fuzzy_match("abc", "xyz") == 0.0


def test_bleu_by_hand():
    # candidate "the cat sat on the mat" vs reference "the cat sat on a mat" (6 words each):
    # p1 = 5/6; bigrams: the-cat, cat-sat, sat-on match (3 of 5) -> (3+1)/(5+1);
    # trigrams: the-cat-sat, cat-sat-on (2 of 4) -> 3/5; 4-grams: the-cat-sat-on (1 of 3) -> 2/4; BP = 1.
    expected = math.exp((math.log(5 / 6) + math.log(4 / 6) + math.log(3 / 5) + math.log(2 / 4)) / 4)
    assert bleu("the cat sat on the mat", "the cat sat on a mat") == pytest.approx(expected)
    assert bleu("The cat, sat.", "the cat sat") == 1.0  # case and punctuation do not count
    assert bleu("", "") == 1.0 and bleu("", "x") == 0.0


def test_rouge_by_hand():
    # "a b c d" vs "a b x d": unigrams share a, b, d -> P = R = 3/4; bigrams share only a-b -> 1/3.
    assert rouge_n("a b c d", "a b x d", 1) == pytest.approx(0.75)
    assert rouge_n("a b c d", "a b x d", 2) == pytest.approx(1 / 3)
    # LCS of "a b c d" and "b a c d" is 3 (b c d or a c d) -> F1 = 3/4.
    assert rouge_l("a b c d", "b a c d") == pytest.approx(0.75)
    assert rouge_l("", "") == 1.0 and rouge_l("a", "") == 0.0


def test_lcs_matches_a_slow_reference():
    import itertools
    import random

    def slow_lcs(a, b):  # the longest subsequence of a that is also one of b, by brute force
        for size in range(len(a), -1, -1):
            for positions in itertools.combinations(range(len(a)), size):
                candidate = [a[i] for i in positions]
                it = iter(b)
                if all(token in it for token in candidate):
                    return size
        return 0

    rng = random.Random(0)
    for _ in range(200):
        a = [rng.choice("abc") for _ in range(rng.randint(0, 6))]
        b = [rng.choice("abc") for _ in range(rng.randint(0, 6))]
        f1 = rouge_l(" ".join(a), " ".join(b))
        lcs = slow_lcs(a, b)
        expected = 1.0 if not a and not b else (0.0 if lcs == 0 else 2 * lcs / (len(a) + len(b)))
        assert f1 == pytest.approx(expected), (a, b)


def test_text_similarity_raw_score_and_threshold():
    spec = {"type": "text_similarity", "reference": "{{ item.answer }}", "evaluation_metric": "rouge_1"}
    raw = grade(build_grader(spec), ["a b c d"], [{"answer": "a b x d"}])
    assert raw == [GradeResult(0.75, "rouge_1 0.750")]
    passing = grade(build_grader({**spec, "pass_threshold": 0.75}), ["a b c d", "a"], [{"answer": "a b x d"}] * 2)
    assert [r.reward for r in passing] == [1.0, 0.0]
    assert passing[1].reason == "rouge_1 0.400 < pass_threshold 0.75"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"evaluation_metric": "cosine"}, "needs a model or word tables"),
        ({"evaluation_metric": "fuzzy"}, "did you mean 'fuzzy_match'?"),
        ({"pass_threshold": 2}, "must be in [0, 1]"),
        ({"pass_threshold": "high"}, "must be a number"),
        ({"reference": ""}, "field 'reference' must be a non-empty string"),
    ],
)
def test_text_similarity_spec_errors(change, message):
    spec = {"type": "text_similarity", "reference": "{{ item.answer }}", "evaluation_metric": "bleu", **change}
    with pytest.raises(UserError) as error:
        build_grader(spec)
    assert message in str(error.value)
