r"""Maths answers: pull the final answer out of a completion and compare it with the gold one.

Extraction (`extract_answer`, in extraction.py):

- strict: the answer *in the requested format*: the last ``\boxed{...}`` (also ``\fbox{...}`` and
  ``\boxed 5``), else the last ``<answer>...</answer>``. Nothing else counts, so strict accuracy
  measures "right and where the prompt asked for it".
- lenient: strict first, then GSM8K's ``#### N``, then "the answer is X" / "answer: X", then the
  last number in the text: "is the model right at all", whatever the layout.

Equivalence (`answers_match`), cheapest first; `quick_match` runs the first two in-process:

1. numbers: integers, decimals, ``a/b`` and ``\frac{a}{b}``, with ``1,000`` separators and
   leading zeros (``025`` = 25), ``$`` and ``\$`` dropped, and a unit after the number dropped:
   a ``\text{}`` / ``\mathrm{}`` group or bare words of two letters or more (``5 \text{ cm}`` = 5,
   ``10 dollars`` = 10; ``2 pi`` stays). Integers and fractions compare exactly; when either side
   is written as a decimal, within REL_TOL relative (``0.3333333`` = ``1/3``, ``0.333`` is not).
   With a percent sign on one side only, ``x\%`` matches both x and x/100 (``50\%`` = ``50`` =
   ``0.5``), as math-verify does; with the sign on both sides, as written (``5\%`` != ``0.5\%``);
2. text: equal after removing spaces, ``$``, ``\text{}`` and LaTeX spacing (``x + 1`` = ``x+1``);
3. symbols: math-verify (symbolic.py) for the rest: LaTeX forms (``\sqrt{2}/2`` =
   ``\frac{\sqrt2}{2}``), intervals (``[1, 2)`` = ``[1,2)``), sets (``\{1, 2\}`` = ``\{2, 1\}``),
   equations (``x = 2`` = ``2``, but ``x = 2`` != ``y = 3``). A numeric match is confirmed with
   REL_TOL (math-verify alone says ``1/2004!`` = ``1/2006!``). This step is slow and sympy can
   hang, so the rewards run it in worker processes with a hard time bound per item (workers.py):
   an item over the bound scores 0 and is counted in `workers.stats()` (`match_many`).

Scoring (`math_accuracy`): None when the gold answer is empty or math-verify cannot read it (the
row cannot be checked: it is skipped, not failed); 0.0 when the completion boxes several different
answers (hedging: otherwise a policy learns to box every candidate and collect the reward for
whichever is right); 1.0 when the extracted answer matches, else 0.0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from rlvr.rewards import symbolic, workers
from rlvr.rewards.extraction import _check_mode, boxed_contents, extract_answer
from rlvr.rewards.scores import Scores, short
from rlvr.rewards.symbolic import REL_TOL
from rlvr.rewards.text import completion_text

_Number = tuple[Fraction, bool]  # exact value, written with a decimal point
MAX_NUMBER_CHARS = 1000  # longer numbers compare as text (and int() refuses over 4,300 digits)

_PLAIN_NUMBER = re.compile(r"[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)")
_LATEX_FRACTION = re.compile(r"([+-]?)\\[dt]?frac(?:\{([^{}]+)\}\{([^{}]+)\}|(\d)(\d))")
_SLASH_FRACTION = re.compile(r"([+-]?)([^/]+)/([^/]+)")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|textnormal|mathrm|mbox)\{([^{}]*)\}")
_LATEX_SPACING = re.compile(r"\\[!,;: ]|\\(?:left|right)(?![A-Za-z])")
# A number followed by a unit: wrapped (5 \text{ cm}) or one or more bare words (10 dollars, 3 km/h).
_UNIT_NUMBER = r"[+-]?\d[\d,]*(?:\.\d+)?(?:/\d+)?|[+-]?\\[dt]?frac\{\d+\}\{\d+\}"
_UNIT_POWER = r"(?:\^\{?\d\}?)?"
_WRAPPED_UNIT = re.compile(
    rf"({_UNIT_NUMBER})\s*(?:\\(?:text|textrm|textnormal|mathrm|mbox)\{{[^{{}}\d]*\}}\s*)+{_UNIT_POWER}"
)
_BARE_UNIT = re.compile(rf"({_UNIT_NUMBER})\s+([A-Za-z]{{2,}}(?:[\s/]+[A-Za-z]+)*){_UNIT_POWER}")
_NOT_UNITS = {"pi", "sqrt", "mod", "times", "cdot"}  # "2 pi" is a number times pi, not 2


def _clean(s: str) -> str:
    r"""`s` without math delimiters, a unit, ``\text{}`` wrappers, LaTeX spacing or a final period;
    a final ``\%`` becomes ``%`` (kept: "50%" may equal 0.5, "50" does not).

    >>> _clean(r" $\text{50}\%$. "), _clean(r"5\ \text{cm}^2"), _clean("10 dollars"), _clean("2 pi")
    ('50%', '5', '10', '2 pi')
    """
    t = s.strip().replace("\\$", "").replace("$", "")
    t = re.sub(r"^\\[(\[]|\\[)\]]$", "", t).strip()
    t = _LATEX_SPACING.sub("", t).replace("{,}", ",")
    t = _strip_unit(t.strip().rstrip(". "))
    t = _TEXT_WRAPPER.sub(r"\1", t)
    t = re.sub(r"\s*\\?%$", "%", t.strip().rstrip(". "))
    return t.rstrip(". ")


def _strip_unit(t: str) -> str:
    """The number alone when `t` is a number followed by a unit, else `t` unchanged."""
    wrapped = _WRAPPED_UNIT.fullmatch(t)
    if wrapped is not None:
        return wrapped.group(1)
    bare = _BARE_UNIT.fullmatch(t)
    if bare is not None and bare.group(2).split()[0].lower() not in _NOT_UNITS:
        return bare.group(1)
    return t


def _compact(s: str) -> str:
    """`s` cleaned and without whitespace, for exact string comparison."""
    return re.sub(r"\s+", "", _clean(s))


def exact_number(s: str) -> _Number | None:
    r"""The exact value of `s` if it is a plain number or fraction, and whether it has a decimal point.

    >>> exact_number("025"), exact_number(r"-\frac{3}{4}"), exact_number("0.50")
    ((Fraction(25, 1), False), (Fraction(-3, 4), False), (Fraction(1, 2), True))
    >>> exact_number("x+1") is None, exact_number("1/0") is None, exact_number("1e5") is None
    (True, True, True)
    """
    t = _compact(s).removesuffix("%")  # the percent rule is applied by `quick_match`
    if len(t) > MAX_NUMBER_CHARS:
        return None
    fraction = _LATEX_FRACTION.fullmatch(t) or _SLASH_FRACTION.fullmatch(t)
    if fraction is None:
        value = _plain_number(t)
        return None if value is None else (value, "." in t)
    sign, *parts = (g for g in fraction.groups() if g is not None)
    numerator, denominator = _plain_number(parts[0]), _plain_number(parts[1])
    if numerator is None or not denominator:
        return None
    value = (-1 if sign == "-" else 1) * numerator / denominator
    return value, "." in parts[0] + parts[1]


def _plain_number(t: str) -> Fraction | None:
    # A regex, not float(): float() also accepts "inf", "nan", "1e400" and "1_000".
    if not _PLAIN_NUMBER.fullmatch(t):
        return None
    try:
        return Fraction(t.replace(",", ""))
    except ValueError:  # over Python's 4,300-digit limit for int(): not compared as a number
        return None


def normalize_number(s: str) -> float | None:
    r"""The value of `s` as a float if it is a plain number, a fraction or a percentage, else None.

    >>> [normalize_number(s) for s in ["07", "7.00", "1,000", "-3/4", r"\frac{1}{2}", r"50\%"]]
    [7.0, 7.0, 1000.0, -0.75, 0.5, 50.0]
    >>> normalize_number("x+1") is None, normalize_number("1/0") is None, normalize_number("9" * 400)
    (True, True, None)
    """
    number = exact_number(s)
    try:
        return None if number is None else float(number[0])
    except OverflowError:  # over 1e308
        return None


def quick_match(pred: str, gold: str, rel_tol: float = REL_TOL) -> bool | None:
    r"""Whether `pred` equals `gold` as numbers or as text; None when only math-verify can tell.

    >>> quick_match("7.0", "7"), quick_match("1000001", "1000000"), quick_match(r"50\%", "0.5")
    (True, False, True)
    >>> quick_match("5 cm", r"5\text{ cm}"), quick_match(r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}") is None
    (True, True)

    A numeric gold answer is matched by a number, or by an equation ending in one — never by an
    expression left for the grader to evaluate:

    >>> (quick_match("12", "12"), quick_match("7 + 5 = 12", "12"), quick_match("7 + 5", "12"),
    ...  quick_match("x = 12", "12"))
    (True, True, False, True)
    """
    p, g = _clean(pred), _clean(gold)
    if not p or not g:
        return False
    g_number = exact_number(g)
    if g_number is not None:
        # A numeric gold needs a numeric final answer: "12", or the right side of "7 + 5 = 12".
        # An unevaluated expression ("7 + 5") is not an answer, though a CAS would simplify it:
        # a policy trained against that learns to box the question (seen on the default job).
        final = _clean(p.rsplit("=", 1)[-1]) if "=" in p else p
        p_number = exact_number(final)
        if p_number is None:
            return False
        return _numbers_match(p_number, g_number, "%" in pred, "%" in gold, rel_tol)
    if _compact(p) == _compact(g):
        return True
    return None


def _numbers_match(pred: _Number, gold: _Number, pred_pct: bool, gold_pct: bool, rel_tol: float) -> bool:
    """Exact for integers and fractions, relative `rel_tol` when a decimal is involved; see the module."""
    (p, p_decimal), (g, g_decimal) = pred, gold
    # With the sign on one side only, "50%" may mean 50 or 0.5: accept both, as math-verify does.
    p_values = {p, p / 100} if pred_pct and not gold_pct else {p}
    g_values = {g, g / 100} if gold_pct and not pred_pct else {g}
    tolerant = p_decimal or g_decimal
    return any(_close(a, b, rel_tol) if tolerant else a == b for a in p_values for b in g_values)


def _close(a: Fraction, b: Fraction, rel_tol: float) -> bool:
    return abs(a - b) <= Fraction(rel_tol) * max(abs(a), abs(b))  # exact: no overflow, no rounding


def answers_match(pred: str, gold: str, rel_tol: float = REL_TOL, alarm_s: int | None = symbolic.TIMEOUT_S) -> bool:
    r"""Whether the predicted answer equals the gold one: numerically, textually, or symbolically.

    Runs math-verify in this process (guarded, but without a hard bound); the reward functions
    send that step to worker processes instead. `alarm_s`: see `symbolic.equivalent`.

    >>> answers_match("7.0", "7"), answers_match("1,000", "1000"), answers_match(r"\frac12", "0.5")
    (True, True, True)
    >>> answers_match(r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}"), answers_match(r"\{1, 2\}", r"\{2, 1\}")
    (True, True)
    >>> answers_match("8", "7"), answers_match("", "7"), answers_match("x = 2", "y = 3")
    (False, False, False)
    """
    quick = quick_match(pred, gold, rel_tol)
    if quick is not None:
        return quick
    return symbolic.equivalent(_clean(pred), _clean(gold), rel_tol, alarm_s)


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
    keys: set[Fraction | str] = set()
    for content in boxed_contents(text):
        if content:
            number = exact_number(content)
            keys.add(number[0] if number is not None else _compact(content))
    return len(keys) > 1


def math_accuracy(
    completions: list[Any], answer: list[Any], mode: str = "strict",
    timeout_s: float = workers.DEFAULT_TIMEOUT_S, rel_tol: float = REL_TOL, **kwargs: Any,
) -> Scores:
    r"""1.0 where the completion's final answer equals the `answer` column, else 0.0; a reason for each.

    None where the gold answer is missing, empty or unreadable; 0.0 for hedged completions (several
    distinct boxes). `timeout_s` bounds each symbolic comparison (a worker is killed past it).

    >>> completions = [r"\boxed{72}", r"\boxed{3} or \boxed{4}", "it is 72", "x", r"\boxed{1}"]
    >>> scores = math_accuracy(completions, answer=["#### 72", "3", "72", "", r"\frac{"])
    >>> scores
    [1.0, 0.0, 0.0, None, None]
    >>> scores.reasons[:3]  # doctest: +NORMALIZE_WHITESPACE
    ["answer '72' matches", 'boxes several different answers',
     'no final answer (strict mode reads \\boxed{} or <answer>)']
    """
    _check_mode(mode)
    rows = list(zip(completions, answer, strict=True))
    texts = [completion_text(c) for c, _ in rows]
    golds = [gold_answer(a) for _, a in rows]
    readable = _readable_golds(golds, timeout_s)
    preds: list[str | None] = []
    verdicts: list[bool | None] = []
    symbolic_rows: dict[tuple[str, str], list[int]] = {}  # a group often repeats an answer: compare once
    for i, (text, gold) in enumerate(zip(texts, golds)):
        hedged = is_hedged(text)
        pred = None if hedged else extract_answer(text, mode)
        preds.append(pred)
        verdict = (None if gold is None or not readable[gold]
                   else False if pred is None else quick_match(pred, gold, rel_tol))
        if verdict is None and gold is not None and readable[gold]:
            symbolic_rows.setdefault((_clean(preds[i] or ""), gold), []).append(i)
        verdicts.append(verdict)
    pairs = list(symbolic_rows)
    for pair, matched in zip(pairs, match_many(pairs, timeout_s, rel_tol)):
        for i in symbolic_rows[pair]:
            verdicts[i] = bool(matched)  # None (timed out) counts as no match
    scores = [None if g is None or not readable[g] else float(bool(v)) for g, v in zip(golds, verdicts)]
    reasons = [_reason(cell, gold, gold is not None and readable[gold], pred, bool(v), is_hedged(text), mode)
               for (_, cell), gold, pred, v, text in zip(rows, golds, preds, verdicts, texts)]
    return Scores(scores, reasons)


def _reason(cell: Any, gold: str | None, readable: bool, pred: str | None, matched: bool, hedged: bool,
            mode: str) -> str:
    """Why one completion scored as it did (rlvr grade shows it)."""
    if cell is None:
        return "the row has no 'answer'"
    if gold is None:
        return "the row's 'answer' is empty"
    if not readable:
        return f"the row's 'answer' {short(gold)} cannot be read as maths"
    if matched:
        return f"answer {short(pred or '')} matches"
    if hedged:
        return "boxes several different answers"
    if pred is None:
        wanted = r"\boxed{} or <answer>" if mode == "strict" else "any answer"
        return f"no final answer ({mode} mode reads {wanted})"
    return f"answer {short(pred)} != expected {short(gold)}"


def math_accuracy_lenient(
    completions: list[Any], answer: list[Any],
    timeout_s: float = workers.DEFAULT_TIMEOUT_S, rel_tol: float = REL_TOL, **kwargs: Any,
) -> Scores:
    """`math_accuracy` in lenient mode: also accepts ``#### N``, "the answer is N", a last number.

    >>> math_accuracy_lenient(["it is 72", "The answer is 8."], ["72", "7"])
    [1.0, 0.0]
    """
    return math_accuracy(completions, answer, mode="lenient", timeout_s=timeout_s, rel_tol=rel_tol)


def match_many(
    pairs: Sequence[tuple[str, str]], timeout_s: float = workers.DEFAULT_TIMEOUT_S, rel_tol: float = REL_TOL
) -> list[bool | None]:
    r"""`answers_match(pred, gold)` for each pair, in the worker processes; None where an item timed out or failed.

    >>> match_many([("0.5", r"\frac{1}{2}"), (r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}"), ("x = 2", "y = 3")])
    [True, True, False]
    """
    return workers.run_shared(_match, [(pred, gold, rel_tol) for pred, gold in pairs], timeout_s)


def parses_many(golds: Sequence[str], timeout_s: float = workers.DEFAULT_TIMEOUT_S) -> list[bool | None]:
    r"""`symbolic.parses(gold)` for each gold answer, in the worker processes; None where an item timed out or failed.

    >>> parses_many([r"\frac{\sqrt{3}}{2}", r"\frac{"])
    [True, False]
    """
    return workers.run_shared(_parses, [(gold,) for gold in golds], timeout_s)


def _parses(gold: str, alarm_s: int | None = None) -> bool:
    """What a worker runs for each gold (its own hard bound replaces math-verify's alarm there)."""
    return symbolic.parses(gold, alarm_s)


def _match(pred: str, gold: str, rel_tol: float, alarm_s: int | None = None) -> bool:
    """What a worker runs for each pair (a top-level function, so that it pickles by name)."""
    return answers_match(pred, gold, rel_tol, alarm_s)


_GOLD_READABLE: dict[str, bool] = {}  # gold text -> whether math-verify reads it; golds recur every epoch
_GOLD_CACHE_SIZE = 100_000


def _readable_golds(golds: list[str | None], timeout_s: float) -> dict[str, bool]:
    """Whether each distinct gold answer can be checked: a number, or something math-verify parses."""
    # Numbers need no parser, and text too costly for math-verify is only compared as text.
    readable = {g: True for g in golds if g is not None and (exact_number(g) is not None or symbolic.too_costly(g))}
    unknown = [g for g in dict.fromkeys(golds) if g is not None and g not in readable]
    to_parse = [g for g in unknown if g not in _GOLD_READABLE]
    for gold, parsed in zip(to_parse, parses_many(to_parse, timeout_s)):
        if parsed is not None:  # a timeout is not cached: the gold may parse on a less busy machine
            if len(_GOLD_READABLE) >= _GOLD_CACHE_SIZE:
                _GOLD_READABLE.clear()
            _GOLD_READABLE[gold] = parsed
    readable.update({g: _GOLD_READABLE.get(g, False) for g in unknown})
    return readable
