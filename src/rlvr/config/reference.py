"""The config documented from its own docstrings: every key with its type, default and meaning.

    field_docs(TrainConfig)             {"max_steps": "Training steps (one sampled batch each).", ...}
    reference_rows(TrainConfig)         [("optim.lr", "float", "2e-05", "Peak learning rate of AdamW."), ...]
    markdown()                          docs/config.md (scripts/config_reference.py writes it; a test keeps it current)
    commented_yaml(config)              `rlvr train --print-config`: the effective YAML, each key's meaning above it

The docstring under each field is the one place a setting is described; this module reads it from the
source with `ast`, so the reference and the effective config can never say something else.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
import types
import typing
from typing import Any, Union, get_args, get_origin

import yaml

from rlvr.config.commands import EvalConfig, RewardModelConfig, SampleConfig, SFTConfig
from rlvr.config.train import TrainConfig

COMMANDS: list[tuple[str, type]] = [
    ("rlvr train", TrainConfig), ("rlvr eval", EvalConfig), ("rlvr sample", SampleConfig), ("rlvr sft", SFTConfig),
    ("rlvr rm", RewardModelConfig),
]


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of dataclass `cls` (its bases' included), whitespace folded.

    >>> field_docs(TrainConfig)["max_steps"]
    'Training steps (one sampled batch each).'
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        node = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0]
        assert isinstance(node, ast.ClassDef)
        for stmt, after in zip(node.body, [*node.body[1:], None]):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
                docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs


def section_of(tp: Any) -> type | None:
    """The dataclass a field holds (itself, in `X | None`, or in `list[X] | None`), or None."""
    if get_origin(tp) in (Union, types.UnionType):
        inner = [a for a in get_args(tp) if a is not type(None)]
        tp = inner[0] if len(inner) == 1 else None
    if get_origin(tp) is list:
        tp = get_args(tp)[0]
    return tp if isinstance(tp, type) and dataclasses.is_dataclass(tp) else None


def type_name(tp: Any) -> str:
    """A field's type as a reader writes it: `float`, `int | None`, `"clip" | "gspo"`, `list[str]`.

    >>> type_name(int | None), type_name(typing.Literal["a", "b"]), type_name(list[str])
    ('int | None', '"a" | "b"', 'list[str]')
    """
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in get_args(tp))
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' for a in get_args(tp))
    if origin in (list, dict, tuple):
        return f"{origin.__name__}[{', '.join(type_name(a) for a in get_args(tp))}]"
    if tp is type(None):
        return "None"
    return getattr(tp, "__name__", str(tp))


def reference_rows(cls: type, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key, type, default, meaning) for every setting of `cls`, sections opened (`optim.lr`, `rewards[].name`)."""
    rows = []
    hints, docs, default = typing.get_type_hints(cls), field_docs(cls), cls()
    for f in dataclasses.fields(cls):
        section = section_of(hints[f.name])
        value = getattr(default, f.name)
        key = prefix + f.name
        if section is not None and get_origin(_inner(hints[f.name])) is list:
            rows.append((key, type_name(hints[f.name]), _shown(value), docs.get(f.name, "")))
            rows += reference_rows(section, f"{key}[].")
        elif section is not None:
            if value is None:  # (an optional section: `model.lora`)
                rows.append((key, f"{section.__name__} | None", "null", docs.get(f.name, "")))
            rows += reference_rows(section, f"{key}.")
        else:
            rows.append((key, type_name(hints[f.name]), _shown(value), docs.get(f.name, "")))
    return rows


def _inner(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        inner = [a for a in get_args(tp) if a is not type(None)]
        return inner[0] if len(inner) == 1 else tp
    return tp


def _shown(value: Any) -> str:
    """A default as YAML writes it, on one line."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    text: str = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix(" ...")


def markdown() -> str:
    """docs/config.md: a table of every setting of every command's config."""
    out = ["# Configuration reference", "",
           "Every setting of every command, generated from the docstrings of the config dataclasses "
           "(`src/rlvr/config/`) by `scripts/config_reference.py`; a test fails when this page is stale. "
           "Set them in a YAML file (`--config`), with `--set key=value`, or from Python "
           "(`rlvr.GRPO(config={...})`); `rlvr train --print-config` prints the effective config with these "
           "meanings. Names from TRL: [from_trl.md](from_trl.md).", ""]
    for command, cls in COMMANDS:
        out += [f"## `{command}`: {cls.__name__}", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        out += [f"| `{key}` | {_cell(kind)} | `{_cell(default)}` | {_cell(doc)} |"
                for key, kind, default, doc in reference_rows(cls)]
        out.append("")
    return "\n".join(out)


def _class_doc(value: Any) -> str:
    """A section's own docstring (its first paragraph), where it has one."""
    doc = type(value).__doc__ or ""
    if not dataclasses.is_dataclass(value) or doc.startswith(f"{type(value).__name__}("):  # (dataclass's made-up one)
        return ""
    return " ".join(doc.split("\n\n")[0].split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def commented_yaml(config: Any, indent: int = 0) -> str:
    """`config` as YAML that loads back to the same settings, each key preceded by its meaning as a comment."""
    lines: list[str] = []
    docs: dict[str, str] = field_docs(type(config))  # type: ignore[arg-type]
    pad = " " * indent
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        for line in textwrap.wrap(docs.get(f.name) or _class_doc(value), width=100 - indent):
            lines.append(f"{pad}# {line}")
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            lines.append(f"{pad}{f.name}:")
            lines.append(commented_yaml(value, indent + 2).rstrip("\n"))
        else:
            plain = [dataclasses.asdict(v) for v in value] if isinstance(value, list) and value and \
                dataclasses.is_dataclass(value[0]) else value
            lines.append(f"{pad}{f.name}: {_shown(plain)}")
    return "\n".join(lines) + "\n"
