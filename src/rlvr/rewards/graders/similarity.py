"""Text similarity metrics for the ``text_similarity`` grader, each ``(text, reference) -> [0, 1]``.

- fuzzy_match: difflib's SequenceMatcher ratio on the raw characters, ``2 * matches / total``.
- bleu: sentence BLEU over 1- to 4-grams (Papineni et al. 2002), with "BLEU+1" smoothing (Lin &
  Och 2004: add one to the matches and the count of every n-gram order above 1), so one missing
  4-gram does not zero a short sentence.
- rouge_1 … rouge_5: F1 of overlapping n-grams (Lin 2004).
- rouge_l: F1 from the longest common subsequence of words (Lin 2004, §3).

Word metrics compare lowercased ``\\w+`` tokens, so punctuation and case do not count.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Callable
from functools import partial

BLEU_MAX_ORDER = 4


def fuzzy_match(text: str, reference: str) -> float:
    """difflib's similarity ratio of the two strings.

    >>> fuzzy_match("kitten", "sitting")  # 4 matching characters: 2 * 4 / (6 + 7)
    0.6153846153846154
    >>> fuzzy_match("", ""), fuzzy_match("abc", "")
    (1.0, 0.0)
    """
    return difflib.SequenceMatcher(None, text, reference, autojunk=False).ratio()


def words(text: str) -> list[str]:
    """Lowercased word tokens.

    >>> words("The cat, the HAT!")
    ['the', 'cat', 'the', 'hat']
    """
    return re.findall(r"\w+", text.lower())


def ngrams(tokens: list[str], n: int) -> Counter[tuple[str, ...]]:
    """Counts of the n-grams of `tokens`.

    >>> ngrams(["a", "b", "a", "b"], 2)
    Counter({('a', 'b'): 2, ('b', 'a'): 1})
    """
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def bleu(text: str, reference: str) -> float:
    """Smoothed sentence BLEU of `text` against one reference.

    ``BP * exp(mean(log p_n))`` for n = 1..4, where p_n is the clipped n-gram precision (plus one
    above and below for n > 1) and ``BP = exp(1 - r / c)`` penalises a text shorter than the reference.

    >>> bleu("the cat sat on the mat", "the cat sat on the mat")
    1.0
    >>> round(bleu("the cat", "the cat sat"), 4)  # all precisions 1, BP = exp(1 - 3/2)
    0.6065
    >>> bleu("dog", "the cat")  # no word in common
    0.0
    """
    candidate, ref = words(text), words(reference)
    if not candidate or not ref:
        return float(candidate == ref)
    log_precisions = []
    for n in range(1, BLEU_MAX_ORDER + 1):
        counts, ref_counts = ngrams(candidate, n), ngrams(ref, n)
        matches = sum(min(count, ref_counts[gram]) for gram, count in counts.items())
        total = sum(counts.values())
        smoothing = 1 if n > 1 else 0
        if matches + smoothing == 0:
            return 0.0
        log_precisions.append(math.log((matches + smoothing) / (total + smoothing)))
    brevity = 1.0 if len(candidate) > len(ref) else math.exp(1 - len(ref) / len(candidate))
    return brevity * math.exp(sum(log_precisions) / BLEU_MAX_ORDER)


def rouge_n(text: str, reference: str, n: int) -> float:
    """F1 of the n-grams shared by the two texts.

    >>> round(rouge_n("the cat sat", "the cat ran away", 1), 6)  # 2 shared: P = 2/3, R = 2/4, F1 = 4/7
    0.571429
    >>> rouge_n("the cat sat", "the cat ran away", 2)  # "the cat": P = 1/2, R = 1/3, F1 = 2/5
    0.4
    """
    counts, ref_counts = ngrams(words(text), n), ngrams(words(reference), n)
    overlap = sum((counts & ref_counts).values())
    return _f1(overlap, sum(counts.values()), sum(ref_counts.values()))


def rouge_l(text: str, reference: str) -> float:
    """F1 from the longest common subsequence of words.

    >>> rouge_l("the cat sat on a mat", "a cat sat on the mat")  # LCS "cat sat on mat": 4 of 6
    0.6666666666666666
    """
    candidate, ref = words(text), words(reference)
    return _f1(_lcs_length(candidate, ref), len(candidate), len(ref))


def _lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence, by the textbook dynamic programme in O(len(a) * len(b))."""
    previous = [0] * (len(b) + 1)
    for token in a:
        current = [0]
        for j, other in enumerate(b):
            current.append(previous[j] + 1 if token == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def _f1(overlap: int, predicted: int, relevant: int) -> float:
    if predicted == 0 and relevant == 0:
        return 1.0  # two empty texts are the same text
    if overlap == 0:
        return 0.0
    precision, recall = overlap / predicted, overlap / relevant
    return 2 * precision * recall / (precision + recall)


METRICS: dict[str, Callable[[str, str], float]] = {
    "fuzzy_match": fuzzy_match,
    "bleu": bleu,
    **{f"rouge_{n}": partial(rouge_n, n=n) for n in range(1, 6)},
    "rouge_l": rouge_l,
}

# OpenAI's other metrics need an embedding model (cosine) or synonym tables (meteor); named here
# so the error can say why they are missing rather than that they do not exist.
UNSUPPORTED_METRICS = ("cosine", "gleu", "meteor")
