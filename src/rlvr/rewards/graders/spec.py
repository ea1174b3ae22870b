"""Grader specs: read one from a dict, a YAML or JSON file, inline JSON or a bare type name, and
check its fields.

A spec is a mapping with a ``type`` (see `rlvr.rewards.graders.build`) and that type's fields,
shaped after OpenAI's reinforcement fine-tuning graders, e.g.::

    type: string_check
    name: exact
    input: "{{ sample.output_text }}"
    reference: "{{ item.answer }}"
    operation: eq

This module only reads and checks; building a reward from a spec is `rlvr.rewards.graders.build`.
Every check raises a one-line `UserError` that names the grader and the field at fault.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.config.yaml_files import read_text_file, read_yaml_file
from rlvr.errors import UserError, a_kind

COMMON_FIELDS = ("type", "name")


def load_grader_spec(source: str | Path | Mapping[str, Any], types: Sequence[str]) -> dict[str, Any]:
    """The spec named by `source`: a mapping, a .yaml/.yml/.json file, inline JSON, or one of `types`
    by name (that type with its defaults).

    >>> types = ["math", "format", "string_check"]
    >>> load_grader_spec("math", types)
    {'type': 'math'}
    >>> load_grader_spec('{"type": "format", "format": "think_answer"}', types)
    {'type': 'format', 'format': 'think_answer'}
    >>> load_grader_spec("maths", types)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: grader 'maths' is neither a file nor a grader type; did you mean 'math'? ...
    """
    if isinstance(source, Mapping):
        spec: Any = dict(source)
        origin = "grader spec"
    else:
        text = str(source).strip()
        spec, origin = _spec_from_text(text, types)
    if not isinstance(spec, dict):
        raise UserError(f"{origin} is {a_kind(spec)}, not a mapping (write 'type: ...' and its fields)")
    if "type" not in spec:
        raise UserError(f"{origin} has no 'type' (add one of: {', '.join(types)})")
    return spec


def _spec_from_text(text: str, types: Sequence[str]) -> tuple[Any, str]:
    """The parsed spec and a phrase naming where it came from, for error messages."""
    if text in types:
        return {"type": text}, f"grader type '{text}'"
    if text.startswith("{"):
        return _parse_json(text, "inline grader spec"), "inline grader spec"
    path = Path(text).expanduser()
    if path.is_file():
        origin = f"grader spec {text}"
        if path.suffix.lower() != ".json":
            return read_yaml_file(path, origin), origin
        return _parse_json(read_text_file(path, origin), origin), origin
    raise UserError(
        f"grader '{text}' is neither a file nor a grader type{did_you_mean(text, types)} "
        f"(types: {', '.join(types)}; or give a .yaml or .json spec file)"
    )


def _parse_json(content: str, origin: str) -> Any:
    try:
        return json.loads(content)
    except json.JSONDecodeError as e:
        raise UserError(f"{origin} is not valid JSON: {e} (fix the syntax there)") from None


def did_you_mean(name: str, choices: Sequence[str] | Mapping[str, Any]) -> str:
    """``"; did you mean 'x'?"`` for the choice closest to `name`, or "" when none is close.

    >>> did_you_mean("refrence", ["input", "reference"]), did_you_mean("zzz", ["input"])
    ("; did you mean 'reference'?", '')
    """
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def check_fields(spec: Mapping[str, Any], required: Sequence[str], optional: Sequence[str], where: str) -> None:
    """A UserError for the first missing required field or unknown field of `spec`.

    >>> check_fields({"type": "x", "refrence": "a"}, ["reference"], [], "grader 'x'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: grader 'x': unknown field 'refrence'; did you mean 'reference'? ...
    """
    known = [*COMMON_FIELDS, *required, *optional]
    for key in spec:
        if key not in known:
            raise UserError(
                f"{where}: unknown field '{key}'{did_you_mean(str(key), known)} "
                f"(this grader's fields: {', '.join(known)})"
            )
    for key in required:
        if key not in spec:
            raise UserError(f"{where}: missing field '{key}' (this grader needs: {', '.join(required)})")


def get_str(spec: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    """`spec[key]` as a non-empty string, or `default` when absent (required when default is None)."""
    value = spec.get(key, default)
    if not isinstance(value, str) or not value:
        raise UserError(f"{where}: field '{key}' must be a non-empty string, got {value!r}")
    return value


def get_choice(spec: Mapping[str, Any], key: str, choices: Sequence[str], where: str, default: str) -> str:
    """`spec[key]`, which must be one of `choices`; `default` when absent.

    >>> get_choice({"operation": "equals"}, "operation", ["eq", "ne"], "grader 'g'", "eq")
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: grader 'g': field 'operation' is 'equals'; use one of: eq, ne
    """
    value = spec.get(key, default)
    if value not in choices:
        raise UserError(
            f"{where}: field '{key}' is {value!r}{did_you_mean(str(value), choices)}; use one of: {', '.join(choices)}"
        )
    return str(value)


def get_number(
    spec: Mapping[str, Any], key: str, where: str, default: float | None = None, *, minimum: float | None = None,
    positive: bool = False,
) -> float:
    """`spec[key]` as a float (bools and NaN refused), `default` when absent; >= `minimum`, > 0 when `positive`."""
    value = spec.get(key, default)
    # Bools refused: True is an int, and `timeout_s: yes` is a mistake, not 1 second.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise UserError(f"{where}: field '{key}' must be a number, got {value!r}")
    if positive and value <= 0:
        raise UserError(f"{where}: field '{key}' must be above 0, got {value!r}")
    if minimum is not None and value < minimum:
        raise UserError(f"{where}: field '{key}' must be at least {minimum:g}, got {value!r}")
    return float(value)


def get_int(spec: Mapping[str, Any], key: str, where: str, default: int, minimum: int = 1) -> int:
    """`spec[key]` as an integer of at least `minimum`; `default` when absent.

    >>> get_int({"max_tries": 2.5}, "max_tries", "grader 'g'", 3)
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: grader 'g': field 'max_tries' must be a whole number >= 1, got 2.5
    """
    value = spec.get(key, default)
    if type(value) is not int or value < minimum:  # `type(...) is`: True is an int, and not a count
        raise UserError(f"{where}: field '{key}' must be a whole number >= {minimum}, got {value!r}")
    return value


def get_str_list(spec: Mapping[str, Any], key: str, where: str) -> list[str]:
    """`spec[key]` as a non-empty list of non-empty strings."""
    value = spec.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise UserError(f"{where}: field '{key}' must be a non-empty list of strings, got {value!r}")
    return list(value)


def get_mapping(spec: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    """`spec[key]` as a dict with string keys; {} when absent."""
    value = spec.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise UserError(f"{where}: field '{key}' must be a mapping of names to values, got {value!r}")
    return dict(value)
