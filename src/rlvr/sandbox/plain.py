"""Plain values <-> JSON with exact types, so only builtins ever cross a process boundary.

Standard library only: this file is also copied into the sandboxes (`serve_calls.py`,
`check_calls.py`). `encode` accepts exactly None, bool, int, float, str and lists, tuples,
dicts, sets of them — ``type(x) is int``, not ``isinstance``, so an int subclass with a forged
``__eq__`` is refused. JSON has no tuples, sets or non-string keys, so those are tagged: any
JSON object in an encoded value is a tag, ``{"tuple": [...]}``, ``{"set": [...]}`` or
``{"dict": [[key, value], ...]}``.

>>> encode([1, (2.5, "a"), {3: None}])
[1, {'tuple': [2.5, 'a']}, {'dict': [[3, None]]}]
>>> decode(encode([1, (2.5, "a"), {3: None}, {True, 0}]))
[1, (2.5, 'a'), {3: None}, {0, True}]
"""

from __future__ import annotations

from typing import Any

_SCALARS = (type(None), bool, int, float, str)


class Unsupported(TypeError):
    """A value that is not a plain builtin (or nests one)."""


def encode(value: Any) -> Any:
    """`value` as JSON-ready data; Unsupported for anything but plain builtins."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list:
        return [encode(item) for item in value]
    if kind is tuple:
        return {"tuple": [encode(item) for item in value]}
    if kind in (set, frozenset):
        return {"set": [encode(item) for item in value]}
    if kind is dict:
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    raise Unsupported(f"a {kind.__name__} is not a plain value (None, bool, int, float, str, "
                      "list, tuple, dict, set)")


def decode(data: Any) -> Any:
    """The value `encode` was given; ValueError for data `encode` could not have produced."""
    if type(data) in _SCALARS:
        return data
    if type(data) is list:
        return [decode(item) for item in data]
    if type(data) is not dict or len(data) != 1:
        raise ValueError("not an encoded value")
    (tag, items), = data.items()
    if type(items) is not list:
        raise ValueError(f"malformed {tag!r} tag")
    try:
        if tag == "tuple":
            return tuple(decode(item) for item in items)
        if tag == "set":
            return {decode(item) for item in items}
        if tag == "dict":
            return {decode(k): decode(v) for k, v in items}
    except TypeError as exc:  # unhashable key or element, or a pair that is not a pair
        raise ValueError(f"malformed {tag!r} tag: {exc}") from None
    raise ValueError(f"unknown tag {tag!r}")
