r"""Symbolic equivalence with math-verify, guarded against answers that would never finish.

math-verify hands the answers to sympy, which computes powers and factorials exactly: a completion
boxing ``9^{9^9}`` or ``(10^{10})!`` stalls the reward for minutes. Three guards, cheapest first:

1. inputs over MAX_CHARS characters are not compared;
2. `is_expensive` refuses power towers, stacked or 4-digit exponents, and chained factorials,
   the same way on every thread, so a completion's reward does not depend on where it is scored;
3. math-verify's own timeouts, on the main thread only: they use signal.alarm, which raises
   ValueError in any other thread, so elsewhere they are turned off (`None`).
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


def equivalent(pred: str, gold: str) -> bool:
    r"""Whether math-verify finds `pred` and `gold` (LaTeX without ``$``) mathematically equal.

    False when either is too long or too expensive to compare, or math-verify fails on it.

    >>> equivalent(r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}"), equivalent("(x+1)^2", "x^2+2x+1")
    (True, True)
    >>> equivalent("9^{9^9}", "1")
    False
    """
    if len(pred) > MAX_CHARS or len(gold) > MAX_CHARS or is_expensive(pred) or is_expensive(gold):
        return False
    from math_verify import parse, verify  # imports sympy: only when a comparison needs it

    timeout = TIMEOUT_S if _alarm_usable() else None
    parse_kwargs = _if_accepted(parse, "parsing_timeout", timeout)
    verify_kwargs = _if_accepted(verify, "timeout_seconds", timeout)
    try:
        gold_parsed = parse(f"${gold}$", **parse_kwargs)
        pred_parsed = parse(f"${pred}$", **parse_kwargs)
        return bool(gold_parsed and pred_parsed and verify(gold_parsed, pred_parsed, **verify_kwargs))
    except Exception:  # sympy and latex2sympy raise many unrelated types on odd input: a miss
        return False


def _alarm_usable() -> bool:
    """Whether math-verify's signal.alarm timeouts work here: POSIX, main thread."""
    return os.name == "posix" and threading.current_thread() is threading.main_thread()


def _if_accepted(fn: Callable[..., Any], parameter: str, value: int | None) -> dict[str, int | None]:
    """``{parameter: value}`` if `fn` takes `parameter` (older math-verify versions may not)."""
    return {parameter: value} if parameter in inspect.signature(fn).parameters else {}
