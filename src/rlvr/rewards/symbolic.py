r"""Symbolic equivalence with math-verify, guarded against answers that would never finish.

math-verify hands the answers to sympy, which computes powers and factorials exactly: a completion
boxing ``9^{9^9}`` or ``(10^{10})!`` stalls the reward for minutes. Three guards, cheapest first:

1. inputs over MAX_CHARS characters are not compared;
2. `is_expensive` refuses power towers, stacked or 4-digit exponents, and chained factorials,
   the same way on every thread, so a completion's reward does not depend on where it is scored;
3. math-verify's own timeouts, on the main thread only: they use signal.alarm, which raises
   ValueError in any other thread, so elsewhere they are turned off (`None`). They cannot stop
   C code either: the hard bound is a killable worker process (workers.py), which runs these
   same functions with the alarm off.

The first comparison in a process also sets up math-verify's LaTeX parser (its grammar, ~0.1 s on an idle
machine, seconds on a loaded one) and sympy's simplification of polynomials (~0.3 s idle, over the 2-second
alarm on a loaded one: the suite's `pytest -n 2` once timed out ``(x+1)^2`` = ``x^2+2x+1`` that way): `warm_up`
does both once, on a fixed pair, before any answer's timeout starts, so that the set-up never times a correct
answer out as a miss.

math-verify also compares numbers with an absolute tolerance (``evalf(chop=True)``, rounding to
6 decimals), so ``\frac{1}{20!}`` "equals" ``\frac{1}{21!}`` and ``10^{-20}`` equals ``10^{-21}``.
A match between two numeric values is therefore confirmed with a relative tolerance (`REL_TOL`).
"""

from __future__ import annotations

import inspect
import os
import re
import threading
from collections.abc import Callable
from typing import Any

MAX_CHARS = 200
TIMEOUT_S = 2  # per parse and per verify; an int because signal.alarm takes whole seconds
WARM_UP_TIMEOUT_S = 60  # the one-off set-up's alarm: generous, it reads no answer
WARM_UP_PAIR = ("(x+1)^2", "x^2+2x+1")  # parsing, and sympy's expansion and simplification of polynomials
REL_TOL = 1e-6  # two numeric values match when |a - b| <= REL_TOL * max(|a|, |b|)

_COMBINATORIAL = re.compile(r"!|\\[dt]?binom|\\choose|\\Gamma|\\prod")
_CLOSING = {"{": "}", "(": ")"}
_OPENING = {"}": "{", ")": "("}


def is_expensive(s: str) -> bool:
    r"""Whether sympy might spend unbounded time on `s`: huge powers or factorials.

    Small ones stay allowed (``x^2``, ``2^{10}``, ``5!``, ``\binom{5}{2}``).

    >>> [is_expensive(s) for s in ["x^2+2x+1", "2^{10}", "5!", r"\binom{5}{2}"]]
    [False, False, False, False]
    >>> [is_expensive(s) for s in ["9^{9^9}", "10^{100000}", "(10^{10})!", "{9^9}^9", "9**9**9"]]
    [True, True, True, True, True]
    """
    t = s.replace("**", "^")
    combinatorial = len(_COMBINATORIAL.findall(t))
    if combinatorial > 1 or (combinatorial == 1 and re.search(r"\^|\d{4}", t)):
        return True
    return any(_is_huge_power(t, m.start()) for m in re.finditer(r"\^", t))


def _is_huge_power(t: str, caret: int) -> bool:
    """Whether the power at index `caret` nests another power or has a 4-digit exponent."""
    exponent, end = _group_after(t, caret + 1)
    base = _group_before(t, caret)
    stacked = t[end:].lstrip().startswith("^")  # 9^{999}^{999}
    return "^" in exponent or "^" in base or stacked or re.search(r"\d{4}", exponent) is not None


def _group_after(t: str, i: int) -> tuple[str, int]:
    """The exponent starting at `i` (a braced or bracketed group, or one token) and its end."""
    while i < len(t) and t[i].isspace():
        i += 1
    if i < len(t) and t[i] in _CLOSING:
        depth = 0
        for j in range(i, len(t)):
            depth += (t[j] == t[i]) - (t[j] == _CLOSING[t[i]])
            if depth == 0:
                return t[i : j + 1], j + 1
        return t[i:], len(t)  # unbalanced: treat everything after as the exponent
    token = re.match(r"\\[A-Za-z]+|\d+|.?", t[i:], re.DOTALL)
    assert token is not None  # the pattern also matches the empty string
    return token.group(), i + token.end()


def _group_before(t: str, i: int) -> str:
    """The base ending just before index `i`: a braced or bracketed group, or one token."""
    j = i
    while j > 0 and t[j - 1].isspace():
        j -= 1
    if j > 0 and t[j - 1] in _OPENING:
        close, depth = t[j - 1], 0
        for k in range(j - 1, -1, -1):
            depth += (t[k] == close) - (t[k] == _OPENING[close])
            if depth == 0:
                return t[k:j]
        return t[:j]
    token = re.search(r"(\\?[A-Za-z]+|\d+)$", t[:j])
    return token.group() if token else ""


def equivalent(pred: str, gold: str, rel_tol: float = REL_TOL, alarm_s: int | None = TIMEOUT_S) -> bool:
    r"""Whether math-verify finds `pred` and `gold` (LaTeX without ``$``) mathematically equal.

    False when either is too long or too expensive to compare, or math-verify fails on it.
    `alarm_s` is math-verify's own timeout, used on the main thread only; None turns it off
    (a worker process, whose hard bound is being killed, passes None).

    >>> equivalent(r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}"), equivalent("(x+1)^2", "x^2+2x+1")
    (True, True)
    >>> equivalent("9^{9^9}", "1"), equivalent(r"\frac{1}{20!}", r"\frac{1}{21!}")
    (False, False)
    """
    if too_costly(pred) or too_costly(gold):
        return False
    warm_up(alarm_s and WARM_UP_TIMEOUT_S)
    return _equivalent(pred, gold, rel_tol, alarm_s)


def _equivalent(pred: str, gold: str, rel_tol: float, alarm_s: int | None) -> bool:
    from math_verify import parse, verify  # imports sympy: only when a comparison needs it

    timeout = alarm_s if _alarm_usable() else None
    parse_kwargs = _if_accepted(parse, "parsing_timeout", timeout)
    verify_kwargs = _if_accepted(verify, "timeout_seconds", timeout)
    try:
        gold_parsed = parse(_as_latex(gold), **parse_kwargs)
        pred_parsed = parse(_as_latex(pred), **parse_kwargs)
        if not (gold_parsed and pred_parsed and verify(gold_parsed, pred_parsed, **verify_kwargs)):
            return False
        # A percentage parses as x/100 and math-verify then also accepts x: leave that rule to it.
        percent = "%" in pred or "%" in gold
        return percent or not _numbers_differ(gold_parsed[0], pred_parsed[0], rel_tol)
    except Exception:  # sympy and latex2sympy raise many unrelated types on odd input: a miss
        return False


def parses(gold: str, alarm_s: int | None = TIMEOUT_S) -> bool:
    r"""Whether math-verify reads `gold` as mathematics; False means it cannot check answers to it.

    Answers too long or too expensive to parse count as parseable: they are still compared as
    numbers and as text, only the symbolic step is skipped.

    >>> parses(r"\frac{\sqrt{3}}{2}"), parses(r"\{1, 2\}"), parses(r"\frac{"), parses("9^{9^9}")
    (True, True, False, True)
    """
    if too_costly(gold):
        return True
    warm_up(alarm_s and WARM_UP_TIMEOUT_S)
    from math_verify import parse

    timeout = alarm_s if _alarm_usable() else None
    try:
        parsed = parse(_as_latex(gold), **_if_accepted(parse, "parsing_timeout", timeout))
    except Exception:  # as in `equivalent`: any failure to read it is "cannot parse"
        return False
    # parse falls back to the raw string when it cannot build an expression: only sympy objects count.
    return any(not isinstance(p, str) for p in parsed)


_warm_up_lock = threading.Lock()
_warmed_up = False


def warm_up(alarm_s: int | None = WARM_UP_TIMEOUT_S) -> None:
    """Import math-verify and run one comparison that needs simplification, once per process, under a bound of
    `alarm_s` (None: none, as in a worker process, whose bound is being killed) instead of an answer's."""
    global _warmed_up
    with _warm_up_lock:
        if _warmed_up:
            return
        try:
            _equivalent(*WARM_UP_PAIR, REL_TOL, alarm_s)
        except Exception:  # a broken install shows up on the first real comparison, with its reason
            pass
        _warmed_up = True


def too_costly(s: str) -> bool:
    """Whether the symbolic step skips `s`: over MAX_CHARS characters, or `is_expensive`.

    >>> too_costly("x+1"), too_costly("1" * (MAX_CHARS + 1)), too_costly("9^{9^9}")
    (False, True, True)
    """
    return len(s) > MAX_CHARS or is_expensive(s)


def _as_latex(s: str) -> str:
    r"""`s` as inline LaTeX for math-verify, where a bare ``%`` would start a comment: ``50%`` -> ``$50\%$``."""
    return "$" + re.sub(r"(?<!\\)%", r"\\%", s) + "$"


def _numbers_differ(a: Any, b: Any, rel_tol: float) -> bool:
    """Whether `a` and `b` are both numeric sympy expressions further apart than `rel_tol` (relative)."""
    from sympy import Abs, Expr, N

    if not (isinstance(a, Expr) and isinstance(b, Expr) and a.is_number and b.is_number):
        return False  # equations, sets, intervals, expressions in x: math-verify's verdict stands
    x, y = N(a, 30), N(b, 30)  # 30 digits and a free exponent: 1/2004! is not rounded to 0
    return bool(Abs(x - y) > rel_tol * max(Abs(x), Abs(y)))


def _alarm_usable() -> bool:
    """Whether math-verify's signal.alarm timeouts work here: POSIX, main thread."""
    return os.name == "posix" and threading.current_thread() is threading.main_thread()


def _if_accepted(fn: Callable[..., Any], parameter: str, value: int | None) -> dict[str, int | None]:
    """``{parameter: value}`` if `fn` takes `parameter` (older math-verify versions may not)."""
    return {parameter: value} if parameter in inspect.signature(fn).parameters else {}
