r"""Finding the final answer in a completion (the extraction half of rlvr.rewards.math).

- strict: the answer *in the requested format*: the last ``\boxed{...}`` (also ``\fbox{...}`` and
  ``\boxed 5``), else the last ``<answer>...</answer>``. Nothing else counts.
- lenient: strict first, then GSM8K's ``#### N``, then "the answer is X" / "answer: X", then the
  last number in the text.
"""

from __future__ import annotations

import re

from rlvr.config.choices import MODES
from rlvr.errors import UserError

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_HASHES = re.compile(r"####\s*([^\n]*)")
_ANSWER_PHRASE = re.compile(r"(?:the\s+(?:final\s+)?answer\s+is|answer\s*:)\s*:?\s*([^\n]*)", re.I)
# A number not glued to a word or a decimal point: -3, 1,234, 2.5, 3/4.
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?")


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

    strict: the answer in the requested format (last box, else last ``<answer>``); lenient also
    reads ``#### N``, "the answer is X" and, last, the last number.

    >>> extract_answer(r"so \boxed{\frac{1}{2}}"), extract_answer("<think>2+2</think> <answer> 4 </answer>")
    ('\\frac{1}{2}', '4')
    >>> extract_answer("so it is 42") is None, extract_answer("so it is 42", mode="lenient")
    (True, '42')
    >>> extract_answer("Natalia sold 72 clips.\n#### 72", mode="lenient")
    '72'
    """
    _check_mode(mode)
    boxes = [b for b in boxed_contents(text) if b]
    if boxes:
        return boxes[-1]
    tags: list[str] = [t.strip() for t in ANSWER_TAG.findall(text) if t.strip()]
    if tags:
        return tags[-1]
    return _lenient_answer(text) if mode == "lenient" else None


def _lenient_answer(text: str) -> str | None:
    """GSM8K's ``#### N``, else "the answer is X", else the last number in `text`."""
    hashes: list[str] = [h.strip() for h in _HASHES.findall(text) if h.strip()]
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


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise UserError(f"unknown answer extraction mode {mode!r} (use one of {', '.join(MODES)})")
