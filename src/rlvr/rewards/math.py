r"""Maths answers: pull the final answer out of a completion and compare it with the gold one.

Extraction (`extract_answer`), strict mode: the last ``\boxed{...}`` (also ``\fbox{...}`` and
``\boxed 5``), else the last ``<answer>...</answer>``. Lenient mode then falls back to GSM8K's
``#### N``, to "the answer is X" / "answer: X", and finally to the last number in the text.

Equivalence (`answers_match`) is tried cheapest first: as numbers, then as normalised strings,
then with math-verify (`symbolic.equivalent`: slow, so guarded) for what is left, e.g.
``\sqrt{2}/2`` against ``\frac{\sqrt2}{2}``.

A completion that boxes several different answers is hedging and scores 0: otherwise a policy
learns to box every candidate and collect the reward for whichever is right.
"""

from __future__ import annotations

import math
import re
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards import symbolic
from rlvr.rewards.text import completion_text

MODES = ("strict", "lenient")

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_HASHES = re.compile(r"####\s*([^\n]*)")
_ANSWER_PHRASE = re.compile(r"(?:the\s+(?:final\s+)?answer\s+is|answer\s*:)\s*:?\s*([^\n]*)", re.I)
# A number not glued to a word or a decimal point: -3, 1,234, 2.5, 3/4.
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)")
_LATEX_FRACTION = re.compile(r"([+-]?)\\[dt]?frac(?:\{([^{}]+)\}\{([^{}]+)\}|(\d)(\d))")
_SLASH_FRACTION = re.compile(r"([+-]?)([^/]+)/([^/]+)")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox)\{([^{}]*)\}")
_LATEX_SPACING = re.compile(r"\\[!,;: ]|\\(?:left|right)(?![A-Za-z])")


def boxed_contents(text: str) -> list[str]:
    r"""The contents of every top-level ``\boxed{...}`` / ``\fbox{...}`` / ``\boxed X``, in order.

    Braces are balanced, so nested braces stay inside; a box inside a box is not listed twice.

    >>> boxed_contents(r"first \boxed{3}, then \boxed{\frac{1}{2}} and \fbox{x} and \boxed 5$")
    ['3', '\\frac{1}{2}', 'x', '5']
    >>> boxed_contents(r"\boxed{unclosed")
    []
    """
    contents: list[str] = []
    pos = 0
    while (match := _BOX.search(text, pos)) is not None:
        start = match.end()
        i = start
        while i < len(text) and text[i] in " \t":
            i += 1
        pos = i
        if i < len(text) and text[i] == "{":
            closing = _closing_brace(text, i)
            if closing is not None:
                contents.append(text[i + 1 : closing].strip())
                pos = closing + 1
        elif i > start:  # `\boxed 5`: the token after the space
            token = re.match(r"[^\s$]+", text[i:])
            if token is not None:
                contents.append(token.group())
                pos = i + token.end()
    return contents


def _closing_brace(text: str, open_index: int) -> int | None:
    """Index of the brace closing the one at `open_index`, skipping escaped ``\\{`` ``\\}``."""
    depth = 0
    i = open_index
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def extract_answer(text: str, mode: str = "strict") -> str | None:
    r"""The final answer of a completion, or None when it gives none (see the module docstring).

    >>> extract_answer(r"so \boxed{\frac{1}{2}}")
    '\\frac{1}{2}'
    >>> extract_answer("<think>2+2</think> <answer> 4 </answer>")
    '4'
    >>> extract_answer("so it is 42") is None
    True
    >>> extract_answer("so it is 42", mode="lenient")
    '42'
    >>> extract_answer("Natalia sold 72 clips.\n#### 72", mode="lenient")
    '72'
    """
    _check_mode(mode)
    boxes = [b for b in boxed_contents(text) if b]
    if boxes:
        return boxes[-1]
    tags = [t.strip() for t in _ANSWER_TAG.findall(text) if t.strip()]
    if tags:
        return tags[-1]
    return _lenient_answer(text) if mode == "lenient" else None


def _lenient_answer(text: str) -> str | None:
    """GSM8K's ``#### N``, else "the answer is X", else the last number in `text`."""
    hashes = [h.strip() for h in _HASHES.findall(text) if h.strip()]
    if hashes:
        return hashes[-1]
    phrases = [p for p in _ANSWER_PHRASE.findall(text) if p.strip()]
    if phrases:
        phrase = phrases[-1].strip().lstrip("* ")
        if phrase.startswith("$"):  # "the answer is $\frac{1}{2}$, so ..." -> "\frac{1}{2}"
            return phrase[1:].split("$", 1)[0].strip() or None
        number = _NUMBER.match(phrase)
        if number is not None:  # "the answer is 42 apples" -> "42"
            return number.group()
        return re.split(r"\.\s", phrase, maxsplit=1)[0].rstrip(".* ") or None
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def _clean(s: str) -> str:
    r"""`s` without math delimiters, ``\text{}`` wrappers, LaTeX spacing, a trailing ``%`` or period.

    >>> _clean(r" $\text{50}\%$. ")
    '50'
    """
    t = s.strip().replace("\\$", "").replace("$", "")
    t = re.sub(r"^\\[(\[]|\\[)\]]$", "", t).strip()
    t = _TEXT_WRAPPER.sub(r"\1", t)
    t = _LATEX_SPACING.sub("", t).replace("{,}", ",")
    t = re.sub(r"\\?%$", "", t.strip().rstrip(". "))
    return t.rstrip(". ")


def _compact(s: str) -> str:
    """`s` cleaned and without whitespace, for exact string comparison."""
    return re.sub(r"\s+", "", _clean(s))


def normalize_number(s: str) -> float | None:
    r"""The value of `s` if it is a plain number, a fraction or a percentage, else None.

    >>> [normalize_number(s) for s in ["07", "7.00", "1,000", "-3/4", r"\frac{1}{2}", r"50\%"]]
    [7.0, 7.0, 1000.0, -0.75, 0.5, 50.0]
    >>> normalize_number("x+1") is None, normalize_number("1/0") is None
    (True, True)
    """
    t = _compact(s)
    fraction = _LATEX_FRACTION.fullmatch(t) or _SLASH_FRACTION.fullmatch(t)
    if fraction is None:
        return _plain_number(t)
    sign, *parts = (g for g in fraction.groups() if g is not None)
    numerator, denominator = _plain_number(parts[0]), _plain_number(parts[1])
    if numerator is None or not denominator:
        return None
    return (-1.0 if sign == "-" else 1.0) * numerator / denominator


def _plain_number(t: str) -> float | None:
    # A regex, not float(): float() also accepts "inf", "nan", "1e400" and "1_000".
    return float(t.replace(",", "")) if _PLAIN_NUMBER.fullmatch(t) else None


def answers_match(pred: str, gold: str, rel_tol: float = 1e-6) -> bool:
    r"""Whether the predicted answer equals the gold one: numerically, textually, or symbolically.

    >>> answers_match("7.0", "7"), answers_match("1,000", "1000"), answers_match(r"\frac12", "0.5")
    (True, True, True)
    >>> answers_match(r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}")
    True
    >>> answers_match("8", "7"), answers_match("", "7")
    (False, False)
    """
    p, g = _clean(pred), _clean(gold)
    if not p or not g:
        return False
    p_number, g_number = normalize_number(p), normalize_number(g)
    if p_number is not None and g_number is not None:
        return math.isclose(p_number, g_number, rel_tol=rel_tol)
    if _compact(p) == _compact(g):
        return True
    return symbolic.equivalent(p, g)


def gold_answer(answer: Any) -> str | None:
    r"""The gold answer from a dataset cell: after GSM8K's ``####``, inside a ``\boxed{}``, or as is.

    None when there is nothing to compare against (empty, None, NaN).

    >>> gold_answer("She sold 48/2 = 24 clips.\n#### 72"), gold_answer(72), gold_answer(" ")
    ('72', '72', None)
    """
    if answer is None or (isinstance(answer, float) and math.isnan(answer)):
        return None
    text = str(answer)
    if "####" in text:
        text = text.rsplit("####", 1)[1]
    boxes = boxed_contents(text)
    if boxes:
        text = boxes[-1]
    return _clean(text) or None


def is_hedged(text: str) -> bool:
    r"""Whether `text` boxes more than one distinct answer (``\boxed{3}`` ... ``\boxed{4}``).

    >>> is_hedged(r"\boxed{3} or \boxed{4}"), is_hedged(r"\boxed{0.5}, i.e. \boxed{\frac{1}{2}}")
    (True, False)
    """
    keys = set()
    for content in boxed_contents(text):
        if content:
            number = normalize_number(content)
            keys.add(number if number is not None else _compact(content))
    return len(keys) > 1


def math_accuracy(
    completions: list[Any], answer: list[Any], mode: str = "strict", **kwargs: Any
) -> list[float | None]:
    r"""1.0 where the completion's final answer equals the `answer` column, else 0.0.

    None where the gold answer is empty; 0.0 for hedged completions (several distinct boxes).

    >>> completions = [r"\boxed{72}", r"\boxed{3} or \boxed{4}", "it is 72", "x"]
    >>> math_accuracy(completions, answer=["#### 72", "3", "72", ""])
    [1.0, 0.0, 0.0, None]
    """
    _check_mode(mode)
    return [_score(completion_text(c), a, mode) for c, a in zip(completions, answer, strict=True)]


def math_accuracy_lenient(completions: list[Any], answer: list[Any], **kwargs: Any) -> list[float | None]:
    """`math_accuracy` in lenient mode: also accepts ``#### N``, "the answer is N", a last number.

    >>> math_accuracy_lenient(["it is 72", "The answer is 8."], ["72", "7"])
    [1.0, 0.0]
    """
    return math_accuracy(completions, answer, mode="lenient")


def _score(text: str, answer: Any, mode: str) -> float | None:
    gold = gold_answer(answer)
    if gold is None:
        return None
    if is_hedged(text):
        return 0.0
    pred = extract_answer(text, mode)
    return 1.0 if pred is not None and answers_match(pred, gold) else 0.0


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise UserError(f"unknown answer extraction mode {mode!r} (use one of {', '.join(MODES)})")
