"""Config dataclasses from plain values (every key and type checked, one line naming the key) and back to YAML."""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml

from rlvr.config.trl_names import trl_hint
from rlvr.errors import UserError


def from_dict(cls: type, data: Any, prefix: str = "") -> Any:
    """Build dataclass `cls` from a plain mapping, checking every key and type."""
    if not isinstance(data, dict):
        raise UserError(f"config key {prefix.rstrip('.') or '<root>'!r} must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            full = [prefix + name for name in fields]
            known = trl_hint(str(key))  # a TRL name: say where rlvr keeps it, not the nearest spelling
            hint = f"; {known} (docs/from_trl.md)" if known else suggest(prefix + str(key), full)
            shorthand = getattr(cls, "SHORTHAND", None)
            if shorthand and shorthand not in data and not known:  # (`{func: f}` for `{name: f}`)
                hint = f"; this mapping has no {shorthand}: it goes under {prefix + shorthand!r}"
            raise UserError(f"unknown config key {prefix + str(key)!r}{hint}")
    values = {name: _coerce(hints[name], data[name], prefix + name) for name in fields if name in data}
    return cls(**values)


def _coerce(tp: Any, value: Any, key: str) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _coerce(inner[0], value, key)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        shorthand = getattr(tp, "SHORTHAND", None)  # `rewards: [boxed_format]` is `rewards: [{name: boxed_format}]`
        if shorthand and not isinstance(value, (str, dict)):
            raise UserError(f"config key {key!r} must be a {shorthand} or a mapping with its {shorthand} "
                            f"({{{shorthand}: ...}}), got {value!r}")
        return from_dict(tp, {shorthand: value} if shorthand and isinstance(value, str) else value, key + ".")
    if origin is Literal:
        value = "off" if value is False and "off" in args else value  # (YAML reads a bare `off` as false)
        if value not in args:
            hint = suggest(str(value), map(str, args))
            raise UserError(f"config key {key!r} must be one of {list(args)}, got {value!r}{hint}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise UserError(f"config key {key!r} must be a list, got {value!r}")
        return [_coerce(args[0], v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise UserError(f"config key {key!r} must be a mapping of names to values, got {value!r}")
        return dict(value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise UserError(f"config key {key!r} must be a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(a, v, f"{key}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    return _scalar(tp, value, key)


def _scalar(tp: Any, value: Any, key: str) -> Any:
    if tp is float and isinstance(value, str):
        # YAML 1.1 reads `1e-5` (no dot) as a string; accept what Python accepts as a float.
        try:
            value = float(value)
        except ValueError:
            pass
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool),
        str: isinstance(value, str),
    }.get(tp)
    if ok is None:
        raise TypeError(f"config field {key} has unsupported type {tp}")
    if not ok:
        raise UserError(f"config key {key!r} must be {tp.__name__}, got {value!r} ({type(value).__name__})")
    return float(value) if tp is float else value


def suggest(name: str, choices: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def config_to_yaml(config: Any) -> str:
    """A config dataclass as YAML, loadable again with `load_config` (or `load_command_config`)."""
    text: str = yaml.safe_dump(_plain(dataclasses.asdict(config)), sort_keys=False)
    return text


def save_config(config: Any, path: Path) -> None:
    path.write_text(config_to_yaml(config))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
