"""Countdown: combine the given numbers with + - * / to reach the target (as in TinyZero).

The completion's expression is untrusted model output. It is never passed to eval(): it is
parsed with `ast.parse` and walked by an evaluator that knows only integer literals, the four
binary operators and unary minus, so anything else (names, calls, attributes, ``**``) scores 0
without running. Arithmetic is exact (`fractions.Fraction`), so ``8/(3-8/3)`` is exactly 24.
"""

from __future__ import annotations

import ast
import operator
import re
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.extraction import ANSWER_TAG, boxed_contents
from rlvr.rewards.scores import Scores, short
from rlvr.rewards.text import completion_text

MAX_EXPRESSION_CHARS = 200
MAX_NUMBER = 10**6

# Checked before parsing: digits, the four operators, brackets and spaces, nothing else.
_ALLOWED_CHARS = re.compile(r"[0-9+\-*/()\s]+")
_BINARY_OPS: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


class _Rejected(Exception):
    """The expression is not plain arithmetic over small integers."""


def countdown_expression(text: str) -> str | None:
    r"""The expression a completion proposes: the last ``<answer>`` content, else the last box.

    >>> countdown_expression("<think>...</think><answer> (1+2)*4 </answer>")
    '(1+2)*4'
    >>> countdown_expression(r"so \boxed{6*4}"), countdown_expression("24") is None
    ('6*4', True)
    """
    tags: list[str] = ANSWER_TAG.findall(text)
    if tags:
        return tags[-1].strip()
    boxes = boxed_contents(text)
    return boxes[-1] if boxes else None


def evaluate_expression(expression: str) -> tuple[Fraction, list[int]] | None:
    """The exact value of an arithmetic expression and the integers it uses; None if not allowed.

    None for anything but integers, + - * /, unary minus and brackets; for division by zero;
    for expressions over MAX_EXPRESSION_CHARS characters or numbers over MAX_NUMBER.

    >>> evaluate_expression("8/(3-8/3)")
    (Fraction(24, 1), [8, 3, 8, 3])
    >>> evaluate_expression("2**3") is None, evaluate_expression("1/(2-2)") is None
    (True, True)
    """
    if len(expression) > MAX_EXPRESSION_CHARS or not _ALLOWED_CHARS.fullmatch(expression):
        return None
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        numbers: list[int] = []
        return _evaluate(tree.body, numbers), numbers
    except (SyntaxError, ValueError, RecursionError, ZeroDivisionError, _Rejected):
        return None


def _evaluate(node: ast.AST, numbers: list[int]) -> Fraction:
    """Value of an allow-listed AST node; appends each integer literal met to `numbers`."""
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
        left, right = _evaluate(node.left, numbers), _evaluate(node.right, numbers)
        return _BINARY_OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, numbers)
    # `type(...) is int`, not isinstance: bool is an int subclass.
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value <= MAX_NUMBER:
        numbers.append(node.value)
        return Fraction(node.value)
    raise _Rejected(ast.dump(node)[:80])


def countdown(completions: list[Any], numbers: list[Any], target: list[Any], **kwargs: Any) -> Scores:
    """1.0 where the completion's expression uses every given number exactly once and equals target;
    a reason for each. A row whose numbers or target are not numbers is a UserError naming the fix.

    >>> scores = countdown(
    ...     ["<answer>8/(3-8/3)</answer>", "<answer>8*3</answer>", "<answer>(8+8)+(3+3)</answer>"],
    ...     numbers=[[3, 3, 8, 8]] * 3,
    ...     target=[24] * 3,
    ... )
    >>> scores, scores.reasons[1]
    ([1.0, 0.0, 0.0], 'uses [3, 8], not each of [3, 3, 8, 8] once')
    """
    graded = [_score(completion_text(c), n, t) for c, n, t in zip(completions, numbers, target, strict=True)]
    return Scores([reward for reward, _ in graded], [reason for _, reason in graded])


def _score(text: str, numbers: Any, target: Any) -> tuple[float, str]:
    given, goal = _as_ints(numbers), _as_fraction(target)
    expression = countdown_expression(text)
    if expression is None:
        return 0.0, "no <answer> expression"
    result = evaluate_expression(expression)
    if result is None:
        return 0.0, f"{short(expression)} is not arithmetic on integers"
    value, used = result
    # Multiset equality: each given number exactly once, no number invented or repeated.
    if Counter(used) != Counter(given):
        return 0.0, f"uses {sorted(used)}, not each of {sorted(given)} once"
    if value != goal:
        return 0.0, f"{short(expression)} = {value}, not {target}"
    return 1.0, f"{short(expression)} = {target}"


def _as_ints(numbers: Any) -> list[int]:
    try:
        return [int(n) for n in numbers]
    except (TypeError, ValueError) as e:
        message = f"countdown 'numbers' must be a list of integers, got {numbers!r} (fix the data)"
        raise UserError(message) from e


def _as_fraction(target: Any) -> Fraction:
    try:
        return Fraction(target)
    except (TypeError, ValueError) as e:
        raise UserError(f"countdown 'target' must be a number, got {target!r} (fix the dataset)") from e
