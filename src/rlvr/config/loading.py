"""Build a config from defaults, a preset (training), a YAML file and `--set KEY=VALUE` overrides: the layers,
each read (rlvr.config.yaml_files) and put in canonical form here, then merged and built into the dataclass
(rlvr.config.building).

Every mistake is a one-line UserError naming the key: unknown keys (with the nearest valid one), wrong types,
and settings that cannot work together (each config's `validate()`). Each layer is first put in canonical form:
keys of earlier versions move to their place (a config class's ALIASES), a section given as a string sets its
SHORTHAND field (`model: tiny`), and your own code given as an object is named (rlvr.user_code), never copied.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar, Union, get_args, get_origin

from rlvr.config.building import from_dict, suggest
from rlvr.config.presets import PRESET_ALIASES, PRESETS
from rlvr.config.train import TrainConfig
from rlvr.config.yaml_files import deep_merge, parse_override, read_config_file, set_nested
from rlvr.errors import UserError
from rlvr.user_code import register


class Config(Protocol):
    """What every config class is: a dataclass that checks itself."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def validate(self) -> None: ...


C = TypeVar("C", bound=Config)


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (), *, values: dict[str, Any] | None = None,
                **cli: Any) -> TrainConfig:
    """The effective training config: defaults ← preset ← file ← `values` (a mapping of settings, from
    Python) ← overrides ← cli (`max_steps=…` etc.).

    >>> c = load_config(values={"preset": "dr_grpo", "sampling": {"group_size": 4}}, max_steps=3)
    >>> c.algorithm.loss_aggregation, c.sampling.group_size, c.max_steps
    ('constant', 4, 3)
    """
    file_values, override_values = _layers(TrainConfig, path, overrides, cli)
    file_values = deep_merge(file_values, canonical(TrainConfig, values or {}))
    for layer in (file_values, override_values):
        if "preset" in layer:
            layer["preset"] = PRESET_ALIASES.get(layer["preset"], layer["preset"])
    preset = override_values.get("preset", file_values.get("preset", TrainConfig.preset))
    if preset not in PRESETS:
        raise UserError(f"unknown preset {preset!r}: choose from {sorted(PRESETS)}{suggest(str(preset), PRESETS)}")
    merged = dataclasses.asdict(TrainConfig())
    for layer in (PRESETS[preset], file_values, override_values):
        merged = deep_merge(merged, layer)
    return _checked(TrainConfig, merged)


def load_command_config(cls: type[C], path: str | Path | None = None, overrides: Sequence[str] = (), *,
                        values: dict[str, Any] | None = None, **cli: Any) -> C:
    """A command's config: defaults ← file ← `values` ← overrides ← cli, every key, type and setting checked
    (TrainConfig's through `load_config`, presets included)."""
    if cls is TrainConfig:
        return load_config(path, overrides, values=values, **cli)  # type: ignore[return-value]
    file_values, override_values = _layers(cls, path, overrides, cli)
    file_values = deep_merge(file_values, canonical(cls, values or {}))
    return _checked(cls, deep_merge(deep_merge(dataclasses.asdict(cls()), file_values), override_values))


def config_from_dict(cls: type[C], values: dict[str, Any]) -> C:
    """`cls` from a mapping in any accepted form (aliases, shorthands, omitted fields), checked.

    >>> from rlvr.config.commands import EvalConfig
    >>> c = config_from_dict(EvalConfig, {"model": "tiny", "temperature": 0.9, "limit": 3})
    >>> c.model.name, c.generation.temperature, c.data.limit, c.data.name
    ('tiny', 0.9, 3, 'gsm8k')
    """
    return _checked(cls, deep_merge(dataclasses.asdict(cls()), canonical(cls, values)))


def _checked(cls: type[C], values: dict[str, Any]) -> C:
    config: C = from_dict(cls, values)
    config.validate()
    return config


def _layers(cls: type, path: str | Path | None, overrides: Sequence[str],
            cli: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the YAML file's values, the --set overrides merged with the cli's non-None values), each canonical."""
    file_values: dict[str, Any] = read_config_file(Path(path)) if path else {}
    override_values: dict[str, Any] = {}
    settings = [parse_override(item) for item in overrides]
    settings += [(key.split("."), value) for key, value in cli.items() if value is not None]
    named: dict[str, str] = {}  # each setting's current name -> the name it was given by
    for number, (keys, value) in enumerate(settings):  # one at a time, so a later setting of a name wins
        single: dict[str, Any] = {}
        set_nested(single, keys, value)
        single = canonical(cls, single)
        given = ".".join(keys)
        for name in _leaves(single) if number < len(overrides) else ():
            if named.setdefault(name, given) != given:  # (as a file with both is refused)
                raise UserError(f"--set {named[name]} and --set {given} set the same thing: keep only {name}")
        override_values = deep_merge(override_values, single)
    return canonical(cls, file_values), override_values


def _leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted names of the values in nested sections: {"a": {"b": 1}} -> ["a.b"]."""
    return [name for key, value in values.items() for name in
            (_leaves(value, f"{prefix}{key}.") if isinstance(value, dict) and value else [f"{prefix}{key}"])]


def canonical(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """`values` with aliased keys moved to their current place and string shorthands of sections expanded.

    >>> from rlvr.config.train import TrainConfig
    >>> canonical(TrainConfig, {"model": "tiny", "sampling": {"temperature": 0.9, "group_size": 4}})
    {'model': {'name': 'tiny'}, 'sampling': {'group_size': 4}, 'generation': {'temperature': 0.9}}
    >>> canonical(TrainConfig, {"logging": "wandb"})
    {'logging': {'report_to': ['wandb']}}
    """
    out: dict[str, Any] = _copied(values)
    hints = typing.get_type_hints(cls)
    sections = {f.name: s for f in dataclasses.fields(cls) if (s := _section_type(hints[f.name])) is not None}
    for name, section in sections.items():
        shorthand = getattr(section, "SHORTHAND", None)
        if (isinstance(out.get(name), str) or _is_code(out.get(name))) and shorthand:
            out[name] = {shorthand: out[name]}
    for name in getattr(cls, "CALLABLES", ()):  # your own code given as the object: named (rlvr.user_code)
        if _is_code(out.get(name)):
            out[name] = register(out[name])
    for name in getattr(cls, "CODE_IN", ()):  # `params: {tools: [search, add]}`: each function named too
        if isinstance(out.get(name), dict):
            out[name] = {k: [register(x) if _is_code(x) else x for x in v] if isinstance(v, list)
                         else register(v) if _is_code(v) else v for k, v in out[name].items()}
    for name, section in _section_lists(cls, hints).items():  # `rewards: [my_reward, boxed_format]`
        if isinstance(out.get(name), list):
            out[name] = [canonical(section, item) if isinstance(item, dict)
                         else canonical(section, {section.SHORTHAND: item}) if _is_code(item) else item
                         for item in out[name]]
    for old, new in getattr(cls, "ALIASES", {}).items():
        found, value = _pop_nested(out, old.split("."))
        if not found:
            continue
        if _pop_nested(_copied(out), new.split("."))[0]:  # (set already)
            raise UserError(f"config keys {old!r} and {new!r} set the same thing: keep only {new!r}")
        set_nested(out, new.split("."), value)
    for name in getattr(cls, "ONE_OR_MANY", ()):  # `report_to: wandb` is `report_to: [wandb]`
        if isinstance(out.get(name), str):
            out[name] = [out[name]]
    for name, section in sections.items():
        if isinstance(out.get(name), dict):
            out[name] = canonical(section, out[name])
    return out


def _copied(value: Any) -> Any:  # dicts and lists copied all the way down; anything else (your code too) as it is
    return ({k: _copied(v) for k, v in value.items()} if isinstance(value, dict)
            else [_copied(v) for v in value] if isinstance(value, list) else value)


def _is_code(value: Any) -> bool:
    """Whether `value` is code from Python (a function, a class, a callable object, a verifiers environment)."""
    verifiers = type(value).__module__.split(".")[0] == "verifiers" and hasattr(value, "rollout")
    return verifiers or (callable(value) and not isinstance(value, (str, dict, list)))


def _section_lists(cls: type, hints: dict[str, Any]) -> dict[str, Any]:
    """The fields of `cls` that are lists of sections with a SHORTHAND (`rewards`), by their section type."""
    found = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if get_origin(tp) in (Union, types.UnionType):
            tp = next((a for a in get_args(tp) if a is not type(None)), None)
        if get_origin(tp) is list and (section := _section_type(get_args(tp)[0])) and hasattr(section, "SHORTHAND"):
            found[f.name] = section
    return found


def _section_type(tp: Any) -> type | None:
    """The dataclass a field holds (also inside `X | None`), or None."""
    if get_origin(tp) in (Union, types.UnionType):
        inner = [a for a in get_args(tp) if a is not type(None)]
        tp = inner[0] if len(inner) == 1 else None
    return tp if isinstance(tp, type) and dataclasses.is_dataclass(tp) else None


def _pop_nested(target: dict[str, Any], keys: list[str]) -> tuple[bool, Any]:
    """(whether `keys` named a value in `target`, that value), removing it and any section it leaves empty."""
    parent: Any = target
    for key in keys[:-1]:
        parent = parent.get(key) if isinstance(parent, dict) else None
    if not isinstance(parent, dict) or keys[-1] not in parent:
        return False, None
    value = parent.pop(keys[-1])
    if len(keys) > 1 and parent == {}:
        _pop_nested(target, keys[:-1])
    return True, value
