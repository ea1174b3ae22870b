"""Templates in grader specs: ``{{ sample.output_text }}`` and ``{{ item.field }}``.

Two namespaces, as in OpenAI's graders: ``sample`` holds the completion being graded
(``sample.output_text``) and ``item`` holds the dataset row (``item.answer``, nested
``item.meta.source``, list positions ``item.choices.0``).

Rendering is a regex substitution of dotted names looked up in plain dicts and lists. Nothing
is evaluated (no eval, no Jinja), so a template from an untrusted spec or a field value that
itself contains ``{{ ... }}`` can only ever produce text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rlvr.errors import UserError

SAMPLE_FIELDS = ("output_text",)

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.\w+)+")


MISSING = "the row has no field"  # (how MissingField begins: rlvr grade counts the rows it left null)


class MissingField(Exception):
    """The row lacks a field a template names; the grader scores that row None."""


def template_fields(text: str, where: str) -> list[str]:
    """The dotted names in `text`'s placeholders; a UserError for any that is not sample/item.

    >>> template_fields("Q: {{item.question}} A: {{ sample.output_text }}", "grader 'g'")
    ['item.question', 'sample.output_text']
    >>> template_fields("{{ item.__class__ }} {{ 1+1 }}", "grader 'g'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: grader 'g': template '{{ item.__class__ }}' ...
    """
    names = []
    for match in _PLACEHOLDER.finditer(text):
        name = match.group(1).strip()
        parts = name.split(".")
        valid = (
            _DOTTED.fullmatch(name) is not None
            # Lookups only read dicts and lists, so `__class__` could do no harm; it is refused
            # anyway because no real field is spelled that way and it reads like an attack.
            and not any(p.startswith("_") for p in parts)
            and (parts[0] == "item" or (parts[0] == "sample" and ".".join(parts[1:]) in SAMPLE_FIELDS))
        )
        if not valid:
            raise UserError(
                f"{where}: template '{match.group(0)}' is not {{{{ sample.output_text }}}} or "
                "{{ item.<field> }} (use those two forms; nested fields as item.a.b)"
            )
        names.append(name)
    return names


def render(text: str, completion: str, item: Mapping[str, Any]) -> str:
    """`text` with each placeholder replaced by the completion or the item's field.

    Strings are inserted as they are; other values as JSON (``72``, ``[1, 2]``, ``true``).
    A field the item lacks, or holds as null, raises MissingField (a batch of rows arrives column
    by column, where a row without a field holds None).

    >>> item = {"answer": 72, "meta": {"tags": ["easy"]}}
    >>> render("{{ sample.output_text }} vs {{item.answer}} ({{ item.meta.tags.0 }})", "71", item)
    '71 vs 72 (easy)'
    >>> render("{{ item.question }}", "71", item)
    Traceback (most recent call last):
    ...
    rlvr.rewards.graders.template.MissingField: the row has no field 'question'
    """

    def substitute(match: re.Match[str]) -> str:
        namespace, *path = match.group(1).strip().split(".")
        value = completion if namespace == "sample" else lookup(item, path)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return _PLACEHOLDER.sub(substitute, text)


def lookup(item: Mapping[str, Any], path: list[str]) -> Any:
    """The value at a dotted path: dict keys, and integer positions in lists.

    >>> lookup({"tests": [{"input": "1"}]}, ["tests", "0", "input"])
    '1'
    """
    value: Any = item
    for depth, key in enumerate(path):
        if isinstance(value, Mapping) and value.get(key) is not None:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            raise MissingField(f"{MISSING} '{'.'.join(path[: depth + 1])}'")
    return value
