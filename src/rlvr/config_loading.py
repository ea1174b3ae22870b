"""Build a TrainConfig from defaults, a preset, a YAML file and `--set KEY=VALUE` overrides.

Every mistake is a one-line UserError naming the key: unknown keys (with the nearest valid one),
wrong types, and settings that cannot work together.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

from rlvr.config import BAD_DEVICE, DEVICE_PATTERN, PRESETS, TrainConfig
from rlvr.errors import UserError

C = TypeVar("C")  # a config dataclass


def load_config(path: str | Path | None = None, overrides: list[str] = (), **cli: Any) -> TrainConfig:
    """The effective config: defaults ← preset ← file ← overrides ← cli (`max_steps=…` etc.)."""
    file_values, override_values = _layers(path, overrides, cli)
    preset = override_values.get("preset", file_values.get("preset", TrainConfig.preset))
    if preset not in PRESETS:
        raise UserError(f"unknown preset {preset!r}: choose from {sorted(PRESETS)}{_suggest(str(preset), PRESETS)}")
    merged = dataclasses.asdict(TrainConfig())
    for layer in (PRESETS[preset], file_values, override_values):
        merged = _deep_merge(merged, layer)
    config = from_dict(TrainConfig, merged)
    validate(config)
    return config


def load_dataclass_config(cls: type[C], path: str | Path | None = None, overrides: list[str] = (), **cli: Any) -> C:
    """A config of another dataclass (no presets): defaults ← file ← overrides ← cli, every key and
    type checked as for TrainConfig; checks across fields are the caller's."""
    file_values, override_values = _layers(path, overrides, cli)
    return from_dict(cls, _deep_merge(_deep_merge(dataclasses.asdict(cls()), file_values), override_values))


def _layers(path: str | Path | None, overrides: list[str], cli: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the YAML file's values, the --set overrides merged with the cli's non-None values)."""
    file_values: dict[str, Any] = _read_yaml(Path(path)) if path else {}
    override_values: dict[str, Any] = {}
    for item in overrides:
        keys, value = parse_override(item)
        _set_nested(override_values, keys, value)
    for key, value in cli.items():
        if value is not None:
            _set_nested(override_values, key.split("."), value)
    return file_values, override_values


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b=value` -> (["a", "b"], value parsed as a YAML scalar).

    >>> parse_override("sampling.temperature=0.5")
    (['sampling', 'temperature'], 0.5)
    >>> parse_override("data.system_prompt=null")
    (['data', 'system_prompt'], None)
    """
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise UserError(f"--set expects KEY=VALUE, got {item!r} (e.g. --set sampling.temperature=0.7)")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def config_to_yaml(config: Any) -> str:
    """A config dataclass as YAML, loadable again with `load_config` (or `load_dataclass_config`)."""
    return yaml.safe_dump(_plain(dataclasses.asdict(config)), sort_keys=False)


def save_config(config: Any, path: Path) -> None:
    path.write_text(config_to_yaml(config))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UserError(f"config file not found: {path} (check the path given to --config)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise UserError(f"config file {path}{where} is not valid YAML: {getattr(e, 'problem', e)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"config file {path} must hold a mapping of settings, not {type(data).__name__}")
    return data


def _set_nested(target: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        target = target.setdefault(key, {})
        if not isinstance(target, dict):
            raise UserError(f"--set {'.'.join(keys)}: {key!r} is not a section")
    target[keys[-1]] = value


def _deep_merge(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _suggest(name: str, choices: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def from_dict(cls: type, data: Any, prefix: str = "") -> Any:
    """Build dataclass `cls` from a plain mapping, checking every key and type."""
    if not isinstance(data, dict):
        raise UserError(f"config key {prefix.rstrip('.') or '<root>'!r} must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            full = [prefix + name for name in fields]
            raise UserError(f"unknown config key {prefix + str(key)!r}{_suggest(prefix + str(key), full)}")
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
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, key + ".")
    if origin is Literal:
        if value not in args:
            raise UserError(f"config key {key!r} must be one of {list(args)}, got {value!r}{_suggest(str(value), map(str, args))}")
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


def validate(config: TrainConfig) -> None:
    """Reject settings that cannot work together, with the fix in the message."""
    s, a, o = config.sampling, config.algorithm, config.optim
    checks: list[tuple[bool, str]] = [
        (s.group_size >= 2, f"sampling.group_size={s.group_size}: a group needs at least 2 completions to have a baseline"),
        (s.batch_size % s.group_size == 0 if s.group_size > 0 else False,
         f"sampling.batch_size={s.batch_size} is not divisible by sampling.group_size={s.group_size}: "
         f"use a multiple such as {max(1, s.batch_size // max(s.group_size, 1)) * max(s.group_size, 1)}"),
        (s.batch_size > 0, "sampling.batch_size must be positive"),
        (s.max_new_tokens > 0, "sampling.max_new_tokens must be positive"),
        (s.temperature > 0, "sampling.temperature must be > 0 for training (greedy completions have no spread to learn from)"),
        (0 < s.top_p <= 1, f"sampling.top_p={s.top_p} must be in (0, 1]"),
        (s.top_k >= 0, "sampling.top_k must be >= 0 (0 = off)"),
        (s.max_sampling_rounds >= 1, "sampling.max_sampling_rounds must be >= 1 (1 = sample once, as without dynamic_sampling)"),
        (0 <= a.clip_low < 1, f"algorithm.clip_low={a.clip_low} must be in [0, 1)"),
        (a.clip_high >= 0, "algorithm.clip_high must be >= 0"),
        (a.beta >= 0, "algorithm.beta must be >= 0"),
        (a.advantage_eps >= 0, "algorithm.advantage_eps must be >= 0"),
        (a.updates_per_batch >= 1, "algorithm.updates_per_batch must be >= 1"),
        (a.loss_constant is None or a.loss_constant > 0, "algorithm.loss_constant must be positive (or null = max_new_tokens)"),
        (a.ref_refresh_steps >= 0, "algorithm.ref_refresh_steps must be >= 0"),
        (not (a.ref_refresh_steps and a.beta == 0), "algorithm.ref_refresh_steps needs beta > 0 (there is no reference model at beta 0)"),
        (o.lr > 0, "optim.lr must be positive"),
        (o.micro_batch_tokens >= 1, "optim.micro_batch_tokens must be >= 1"),
        (o.warmup_steps >= 0 and o.max_grad_norm >= 0, "optim.warmup_steps and optim.max_grad_norm must be >= 0"),
        (0 <= o.min_lr_ratio <= 1, "optim.min_lr_ratio must be in [0, 1]"),
        (config.max_steps >= 1, "max_steps must be >= 1"),
        (config.data.train_size >= 1 and config.data.eval_size >= 1, "data.train_size and data.eval_size must be >= 1"),
        (config.rewards is None or len(config.rewards) > 0, "rewards must list at least one reward (or be null for the task's defaults)"),
        (config.save_every >= 0 and config.sample_every >= 0, "save_every and sample_every must be >= 0"),
        (config.eval_every >= 0, "eval_every must be >= 0"),
        (re.fullmatch(DEVICE_PATTERN, config.model.device) is not None, BAD_DEVICE.format(config.model.device)),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(message)
