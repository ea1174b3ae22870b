"""docs/code.md, the tour of the code, names what is there: every file, folder, module attribute and class member it
quotes in backticks exists in the source as it says (a rename that forgets the tour fails here)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "rlvr"
TOUR = ROOT / "docs" / "code.md"
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
RUN_FILES = {"model/"}  # what a run directory holds, quoted by the tour too


def quoted() -> list[str]:
    return sorted(set(re.findall(r"`([^`\n]+)`", TOUR.read_text())))


@cache
def modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(PACKAGE).with_suffix("")): ast.parse(p.read_text()) for p in PACKAGE.rglob("*.py")}


def module(path: str) -> ast.Module | None:
    """`rl/batch`, `run.loop` or `update` (a module name found once in the package)."""
    path = path.replace(".", "/")
    if path in modules():
        return modules()[path]
    found = [m for name, m in modules().items() if name.endswith("/" + path)]
    return found[0] if len(found) == 1 else None


def top_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in getattr(tree, "body", []):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def members(cls: ast.ClassDef) -> set[str]:
    """Its methods, class attributes and fields, and what its methods set on self."""
    found = top_names(cls)
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            found.add(node.attr)
    return found


@cache
def all_classes() -> dict[str, list[ast.ClassDef]]:
    """Every class of the package by its name (the walk made once: the tour quotes ~200 names)."""
    found: dict[str, list[ast.ClassDef]] = {}
    for tree in modules().values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(node)
    return found


def classes(name: str) -> list[ast.ClassDef]:
    return all_classes().get(name, [])


def resolves(token: str) -> bool | None:
    """Whether the quoted `token` names something that exists; None: not a name of the code (a setting, a command)."""
    if token in RUN_FILES or re.search(r"\.(json|jsonl|yaml|pt|md)$", token):
        return None  # a run's files and folders, the docs' pages
    if re.fullmatch(r"(src/|tests/|scripts/|bench/)[\w/.\-]*", token):
        return (ROOT / token).exists()
    if re.fullmatch(r"[\w/]+\.py|[\w/]+/", token):
        return (PACKAGE / token).exists() or (ROOT / token).exists()
    call = re.fullmatch(rf"({IDENT})\.({IDENT})(\(.*\))?", token)
    if call and call[1][0].isupper():  # Class.member
        return any(call[2] in members(c) for c in classes(call[1]))
    attr = re.fullmatch(rf"([a-z_][\w/.]*)[./]({IDENT})(\(.*\))?", token)
    if attr and (tree := module(attr[1])) is not None:  # module.attribute, rl/batch.make_batch
        return attr[2] in top_names(tree)
    if re.fullmatch(rf"[A-Z]{IDENT}", token) and token.upper() != token:  # a class (or a type) by its name
        return bool(classes(token)) or any(token in top_names(t) for t in modules().values())
    return None


def test_the_tour_quotes_code_names():
    checked = [t for t in quoted() if resolves(t) is not None]
    assert len(checked) > 60  # (the check reads what the tour quotes, not nothing)


@pytest.mark.parametrize("token", [t for t in quoted() if resolves(t) is not None])
def test_what_the_tour_quotes_exists(token):
    assert resolves(token), f"docs/code.md quotes `{token}`, which the source does not have"


def test_a_renamed_name_is_caught():
    assert resolves("rl/rollouts.RolloutSource") and not resolves("rl/rollouts.RolloutSauce")
    assert resolves("Trainer.step()") and not resolves("Trainer.sample_and_score()")
    assert resolves("rl/recipe.py") and not resolves("train/recipes.py")
    assert resolves("RolloutsAhead") is True and resolves("RolloutsBehind") is False
