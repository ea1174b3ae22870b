r"""Rejection sampling's filters: which judged completions of one prompt become SFT rows.

They run in this order, and a dropped completion is counted under the first filter that drops it:

    truncated       hit max_new_tokens (dropped unless keep_truncated: the model never finished its answer)
    incorrect       the chosen verifier (strict or lenient) did not give 1.0: wrong, or not checkable
    length          fewer than min_tokens or more than max_tokens tokens (the stop token counts)
    format          the chosen format reward (boxed_format, think_answer_format) is not 1.0
    duplicate       the same text as an earlier completion of the prompt, up to whitespace (dedupe)
    max_per_prompt  past the first max_per_prompt survivors, in sampling order

Sampling order (not, say, shortest first) keeps the kept set an unbiased draw of the model's
verified completions: the samples of a prompt are exchangeable, so the first K are a random K.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from rlvr.config import SampleConfig
from rlvr.evaluate.records import SampleRecord
from rlvr.rewards.format import FORMATS as FORMAT_REWARDS

FILTERS = ("truncated", "incorrect", "length", "format", "duplicate", "max_per_prompt")
FORMATS: dict[str, Callable[..., list[float | None]] | None] = {"none": None, **FORMAT_REWARDS}


def is_verified(sample: SampleRecord, verdict: str) -> bool:
    """Whether the `verdict` verifier ("strict" or "lenient") gave 1.0; None (cannot check) is a no.

    >>> s = SampleRecord(text="so 7", tokens=5, truncated=False, correct={"strict": 0.0, "lenient": 1.0}, answer={})
    >>> is_verified(s, "strict"), is_verified(s, "lenient")
    (False, True)
    """
    return sample.correct.get(verdict) == 1.0


def within_length(tokens: int, min_tokens: int, max_tokens: int | None) -> bool:
    """min_tokens <= tokens <= max_tokens, where max_tokens None is no upper bound.

    >>> [within_length(n, 2, 4) for n in (1, 2, 4, 5)], within_length(10**6, 0, None)
    ([False, True, True, False], True)
    """
    return tokens >= min_tokens and (max_tokens is None or tokens <= max_tokens)


def has_format(texts: list[str], format: str) -> list[bool]:
    r"""Whether each completion's format reward is 1.0; format "none" passes every one.

    >>> has_format([r"\boxed{3}", "3", r"\boxed{3} or \boxed{4}"], "boxed")
    [True, False, False]
    >>> has_format(["<think>3</think> <answer>3</answer>", "3"], "think_answer"), has_format(["3"], "none")
    ([True, False], [True])
    """
    reward = FORMATS[format]
    return [True] * len(texts) if reward is None else [score == 1.0 for score in reward(texts)]


def normalise_whitespace(text: str) -> str:
    """The de-duplication key: every run of whitespace made one space, the ends stripped.

    >>> normalise_whitespace("  x =\\n\\n 3\\t")
    'x = 3'
    >>> normalise_whitespace("x = 3") == normalise_whitespace("x=3")  # whitespace between words still counts
    False
    """
    return " ".join(text.split())


def first_occurrences(texts: list[str]) -> list[bool]:
    """True for the first of each set of texts equal up to whitespace, False for the later ones.

    >>> first_occurrences(["a b", "a  b", " a b\\n", "ab", "a b"])
    [True, False, False, True, False]
    """
    seen: set[str] = set()
    first = []
    for text in texts:
        key = normalise_whitespace(text)
        first.append(key not in seen)
        seen.add(key)
    return first


def filter_samples(samples: list[SampleRecord], config: SampleConfig) -> tuple[list[int], Counter[str]]:
    """One prompt's samples (in sampling order) -> (indices of those kept, in order; drops per filter).

    >>> def s(text, ok=1.0, truncated=False):
    ...     return SampleRecord(text, len(text), truncated, {"strict": ok, "lenient": ok}, {})
    >>> samples = [s("a 1"), s("a  1"), s("b", ok=0.0), s("c", truncated=True), s("d 2"), s("e 3")]
    >>> kept, dropped = filter_samples(samples, SampleConfig(max_per_prompt=2))
    >>> kept, dict(dropped)
    ([0, 4], {'truncated': 1, 'incorrect': 1, 'duplicate': 1, 'max_per_prompt': 1})
    """
    dropped: Counter[str] = Counter()
    survivors = list(range(len(samples)))

    def keep(name: str, passes: list[bool]) -> None:
        nonlocal survivors
        dropped[name] += passes.count(False)
        survivors = [i for i, ok in zip(survivors, passes) if ok]

    keep("truncated", [config.keep_truncated or not samples[i].truncated for i in survivors])
    keep("incorrect", [is_verified(samples[i], config.verdict) for i in survivors])
    keep("length", [within_length(samples[i].tokens, config.min_tokens, config.max_tokens) for i in survivors])
    keep("format", has_format([samples[i].text for i in survivors], config.format))
    if config.dedupe:
        keep("duplicate", first_occurrences([samples[i].text for i in survivors]))
    cap = len(survivors) if config.max_per_prompt is None else config.max_per_prompt
    keep("max_per_prompt", [rank < cap for rank in range(len(survivors))])
    return survivors, +dropped  # unary + drops the zero counts


def count_drops(dropped: Counter[str]) -> dict[str, int]:
    """Every filter's count, zeros included, in the order the filters run.

    >>> count_drops(Counter(duplicate=2))
    {'truncated': 0, 'incorrect': 0, 'length': 0, 'format': 0, 'duplicate': 2, 'max_per_prompt': 0}
    """
    return {name: dropped.get(name, 0) for name in FILTERS}
