"""Reading the YAML a user writes (configs, recipes, grader specs) and the `--set KEY=VALUE` overrides beside it,
merged layer on layer: every mistake one line naming the file or the override.

A key given twice in one mapping is refused (YAML requires unique keys; PyYAML would keep the last silently), a
syntax error names its line and column, and a file that cannot be read or is not UTF-8 names the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from rlvr.errors import UserError


class _DuplicateKey(Exception):
    def __init__(self, key: Any, first: int, again: int) -> None:
        super().__init__(key)
        self.key, self.first, self.again = key, first, again


class _UniqueKeys(yaml.SafeLoader):  # type: ignore[misc]  # (PyYAML ships no types)
    """YAML's safe loader that refuses a key given twice in one mapping: YAML requires keys to be unique, and
    PyYAML would keep the last one silently (a section repeated further down replaces the whole first one)."""


def _unique_mapping(loader: _UniqueKeys, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # (`<<: *base`: its keys may be overridden, as YAML says)
            continue
        key, line = loader.construct_object(key_node, deep=True), key_node.start_mark.line + 1
        try:
            if key in seen:
                raise _DuplicateKey(key, seen[key], line)
        except TypeError:  # (an unhashable key, which construct_mapping refuses in its own words)
            continue
        seen[key] = line
    mapping: dict[Any, Any] = loader.construct_mapping(node, deep=deep)
    return mapping


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def parse_yaml(content: str, origin: str) -> Any:
    r"""`content` parsed, or a UserError naming `origin`, the line and column, and the problem.

    >>> parse_yaml("a: 1\nb: [2, 3", "grader spec g.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: grader spec g.yaml, line 2 column 9, is not valid YAML: expected ',' or ']'...
    >>> parse_yaml("algorithm: {beta: 0.5}\nseed: 1\nalgorithm: {policy_loss: gspo}", "config file c.yaml")
    Traceback (most recent call last):
    ...
    rlvr.errors.UserError: config file c.yaml: key 'algorithm' is given twice (lines 1 and 3); YAML keeps only...
    """
    try:
        return yaml.load(content, Loader=_UniqueKeys)  # (a SafeLoader: plain data only)
    except _DuplicateKey as e:
        raise UserError(f"{origin}: key {e.key!r} is given twice (lines {e.first} and {e.again}); YAML keeps "
                        "only the last, so merge the two into one") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f", line {mark.line + 1} column {mark.column + 1}," if mark else ""
        problem = getattr(e, "problem", None) or str(e).strip().splitlines()[0]
        raise UserError(f"{origin}{where} is not valid YAML: {problem} (fix the syntax there)") from None


def read_text_file(path: Path, origin: str) -> str:
    """The text of `path`; unreadable or not UTF-8 is a UserError naming `origin`."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{origin}: cannot read it ({e}); give a readable UTF-8 file") from None


def read_yaml_file(path: Path, origin: str) -> Any:
    """The YAML file at `path` parsed; unreadable, not UTF-8 or not YAML is a UserError naming `origin`."""
    return parse_yaml(read_text_file(path, origin), origin)


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b=value` -> (["a", "b"], value parsed as YAML). Text that YAML would cut at a ` #` (a comment) or read as
    a mapping without braces (`Q: {prompt}`) is the text itself, as typed: a prompt, not YAML; quoted, it is YAML's.

    >>> parse_override("generation.temperature=0.5")
    (['generation', 'temperature'], 0.5)
    >>> parse_override("data.system_prompt=null")
    (['data', 'system_prompt'], None)
    >>> parse_override("data.system_prompt=Answer after ####")[1], parse_override("data.template=Q: {prompt}")[1]
    ('Answer after ####', 'Q: {prompt}')
    >>> parse_override("rewards=[{name: boxed_format, weight: 0.5}]")[1]
    [{'name': 'boxed_format', 'weight': 0.5}]
    """
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise UserError(f"--set expects KEY=VALUE, got {item!r} (e.g. --set generation.temperature=0.7)")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    text = raw.strip()
    if not text.startswith(("'", '"')) and (re.search(r"(^|\s)#", text) or (
            isinstance(value, dict) and not text.startswith("{"))):
        value = text
    return key.strip().split("."), value


def read_config_file(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise UserError(f"config file {path} is a folder: give a YAML file to --config")
    if not path.is_file():
        raise UserError(f"config file not found: {path} (check the path given to --config)")
    data = read_yaml_file(path, f"config file {path}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"config file {path} must hold a mapping of settings, not {type(data).__name__}")
    return data


def set_nested(target: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        target = target.setdefault(key, {})
        if not isinstance(target, dict):
            raise UserError(f"--set {'.'.join(keys)}: {key!r} is not a section")
    target[keys[-1]] = value


def deep_merge(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """`base` with `layer`'s settings on top, section by section.

    >>> deep_merge({"optim": {"lr": 1e-5, "betas": [0.9, 0.99]}}, {"optim": {"lr": 2e-5}, "seed": 1})
    {'optim': {'lr': 2e-05, 'betas': [0.9, 0.99]}, 'seed': 1}
    """
    out = dict(base)
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def flat_settings(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested settings as dotted keys; an empty section is a value of its own.

    >>> flat_settings({"model": {"name": "tiny", "lora": None}, "environment": {"params": {}}, "seed": 0})
    {'model.name': 'tiny', 'model.lora': None, 'environment.params': {}, 'seed': 0}
    """
    out: dict[str, Any] = {}
    for key, value in values.items():
        nested = isinstance(value, dict) and value
        out |= flat_settings(value, f"{prefix}{key}.") if nested else {f"{prefix}{key}": value}
    return out
