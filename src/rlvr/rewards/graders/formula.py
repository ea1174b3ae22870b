"""The ``calculate_output`` formula of a ``multi`` grader, e.g. ``0.7 * accuracy + 0.3 * format``.

Specs may come from anyone, so the formula is never passed to eval(). It is parsed with
`ast.parse` and checked against an allow-list when the grader is built: numbers, the names of
the sub-graders, ``+ - * /``, unary ``+ -``, brackets, and calls to ``min``, ``max`` and ``abs``
with plain arguments. Attribute access, subscripts, ``**``, keywords, lambdas, comprehensions and
every other name are refused with a UserError before anything is graded. Evaluation then walks
the same tree with floats.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rlvr.errors import UserError
from rlvr.rewards.graders.spec import did_you_mean

MAX_FORMULA_CHARS = 1000

FUNCTIONS: dict[str, Callable[..., float]] = {"min": min, "max": max, "abs": abs}
_ARGUMENT_COUNTS = {"min": range(2, 100), "max": range(2, 100), "abs": range(1, 2)}
_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}


@dataclass(frozen=True)
class Formula:
    """A checked arithmetic formula over named values.

    >>> f = Formula.parse("0.5 * accuracy + 0.5 * max(format, 0)", ["accuracy", "format"], "grader 'm'")
    >>> f.evaluate({"accuracy": 1.0, "format": 0.0}), f.names
    (0.5, ('accuracy', 'format'))
    >>> Formula.parse("__import__('os').system('x')", ["accuracy"], "grader 'm'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: grader 'm': calculate_output may only call min, max, abs; ...
    """

    text: str
    tree: ast.Expression
    names: tuple[str, ...]  # the value names the formula uses, in order of first use

    @classmethod
    def parse(cls, text: str, allowed_names: Sequence[str], where: str) -> Formula:
        if len(text) > MAX_FORMULA_CHARS:
            raise UserError(f"{where}: calculate_output is over {MAX_FORMULA_CHARS} characters (shorten it)")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as e:
            raise UserError(
                f"{where}: calculate_output {text!r} is not a formula ({e.msg}); write e.g. '0.5 * a + 0.5 * b'"
            ) from e
        names: list[str] = []
        try:
            _check(tree.body, allowed_names, names, where)
        except RecursionError as e:
            raise UserError(f"{where}: calculate_output is nested too deeply (simplify it)") from e
        return cls(text, tree, tuple(dict.fromkeys(names)))

    def evaluate(self, values: Mapping[str, float]) -> float:
        """The formula's value; ZeroDivisionError when it divides by zero."""
        return _evaluate(self.tree.body, values)


def _check(node: ast.AST, allowed: Sequence[str], names: list[str], where: str) -> None:
    """A UserError for the first node outside the allow-list; collects the names used."""
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left, allowed, names, where)
        _check(node.right, allowed, names, where)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        _check(node.operand, allowed, names, where)
    elif isinstance(node, ast.Constant):
        # `type(...) in`, not isinstance: True is an int, and "0.5 * True" is a typo, not a number.
        if type(node.value) not in (int, float):
            raise UserError(f"{where}: calculate_output has {node.value!r}; only numbers and grader names are allowed")
    elif isinstance(node, ast.Name):
        if node.id not in allowed:
            raise UserError(
                f"{where}: calculate_output uses '{node.id}', which is not a sub-grader"
                f"{did_you_mean(node.id, allowed)} (sub-graders: {', '.join(allowed)})"
            )
        names.append(node.id)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
        plain = not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)
        if not plain or len(node.args) not in _ARGUMENT_COUNTS[node.func.id]:
            raise UserError(
                f"{where}: calculate_output has {ast.unparse(node)[:60]!r}; "
                "write min(a, b, ...), max(a, b, ...) or abs(a) with plain arguments"
            )
        for argument in node.args:
            _check(argument, allowed, names, where)
    elif isinstance(node, ast.Call):
        raise UserError(
            f"{where}: calculate_output may only call {', '.join(FUNCTIONS)}; "
            f"found {ast.unparse(node)[:60]!r} (use + - * / and those functions)"
        )
    else:
        raise UserError(
            f"{where}: calculate_output has {ast.unparse(node)[:60]!r}, which is not allowed "
            "(use numbers, sub-grader names, + - * /, brackets, min, max, abs)"
        )


def _evaluate(node: ast.AST, values: Mapping[str, float]) -> float:
    """The value of a tree `_check` accepted."""
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_evaluate(node.left, values), _evaluate(node.right, values))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_evaluate(node.operand, values))
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, (int, float))  # `_check` let only numbers through
        return float(node.value)
    if isinstance(node, ast.Name):
        return float(values[node.id])
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # the only node left
    arguments = [_evaluate(a, values) for a in node.args]
    return float(FUNCTIONS[node.func.id](*arguments))

