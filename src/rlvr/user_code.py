"""The user's own code named in a config: `module.path:Name` or `path/to/file.py:Name` (rewards,
environments, policy losses, advantage functions). Every failure to find or import it is one line naming
the spec and the fix.

From Python the code can be the object itself (`rewards=[my_reward]`): `register(obj)` names it by where it
lives (`module:qualname`, `file.py:qualname` for a file of the working directory, `__main__:qualname` for a
script's or a notebook's) and keeps it, so that this process finds the object under that name whatever it
is; the config holds the name, and so does the run's config.yaml. A name that only this process can find
(a script's or a notebook's function, a lambda, a function defined inside another, an instance of a class
with `__call__`, a functools.partial: each of the last three numbered, one name per object) is one line when
another process looks for it (`rlvr train --resume`), saying how to give it again.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from rlvr.errors import UserError, a_kind

_REGISTERED: dict[str, Any] = {}  # spec -> the object a Python caller gave under it, in this process
# the marks of a name no other process can import: a script's, a function's own, a lambda, an instance or a partial
_MADE_HERE = ("__main__:", "<locals>", "<lambda>", ")#")


def register(obj: Any) -> str:
    """The spec that names `obj` (see the module docstring), which this process resolves to `obj` itself.

    >>> import math
    >>> register(math.sqrt), load_user_object("math:sqrt", "reward", "function", "") is math.sqrt
    ('math:sqrt', True)
    >>> spec = register(lambda completions, **kw: [0.0] * len(completions))
    >>> ":<lambda>#" in spec, callable(load_user_object(spec, "reward", "function", ""))
    (True, True)
    >>> a, b = functools.partial(math.pow, 2), functools.partial(math.pow, 3)  # (instances, partials: one name each)
    >>> register(a) == register(a), register(a) != register(b), register(a).startswith("math:partial(pow)#")
    (True, True, True)
    """
    inner = obj.func if isinstance(obj, functools.partial) else obj  # (a partial is named after its function)
    module = getattr(inner, "__module__", None) or type(inner).__module__
    qualname = getattr(inner, "__qualname__", None) or f"{type(inner).__qualname__}()"  # (an instance: its class)
    qualname = f"partial({qualname})" if inner is not obj else qualname
    spec = f"{_home(module)}:{qualname}"
    if "<lambda>" in qualname or qualname.endswith(")"):  # (many objects may share it: each is numbered)
        same = [s for s in _REGISTERED if s.rpartition("#")[0] == spec]
        spec = next((s for s in same if _REGISTERED[s] is obj), f"{spec}#{len(same) + 1}")
    _REGISTERED[spec] = obj
    return spec


def registered(spec: str) -> Any:
    """The object registered under `spec` in this process, or None."""
    return _REGISTERED.get(spec)


def _home(module: str) -> str:
    """Where `module` is found again: by its name when it is installed (or not a file of the working
    directory), else by its path there (the `rlvr` command does not import from the working directory)."""
    found = sys.modules.get(module)
    path = getattr(found, "__file__", None)
    if module == "__main__" or not path or module.partition(".")[0] in _installed():
        return module
    try:
        relative = Path(path).resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return module
    return module if "site-packages" in relative.parts else str(relative)


@functools.cache
def _installed() -> frozenset[str]:
    """The top-level packages of the installed distributions (editable ones included)."""
    return frozenset(importlib.metadata.packages_distributions())


def load_user_object(spec: str, kind: str, noun: str, expected: str) -> Any:
    """The callable `spec` names; `kind` ("reward"), `noun` ("function") and `expected` ("a function taking …")
    word the errors."""
    if spec in _REGISTERED:
        return _REGISTERED[spec]
    if any(mark in spec for mark in _MADE_HERE):
        raise UserError(f"{kind} '{spec}' was given as a Python object defined in a script, a notebook or another "
                        "function, which cannot be imported from here: pass it again from Python (rlvr.GRPO(..., "
                        f"rewards=[...]).train(resume=True)), or move it to a module and name it 'module:{noun}'")
    # rpartition: a Windows path "C:\\r.py:f" has its last colon before the name.
    source, _, attribute = spec.rpartition(":")
    if not source or not attribute:
        raise UserError(f"{kind} '{spec}' is not 'module:{noun}' or 'path/to/file.py:{noun}'")
    is_file = source.endswith(".py") or "/" in source or "\\" in source
    module = _from_file(source, spec, kind) if is_file else _from_import(source, spec, kind)
    if not hasattr(module, attribute):
        public = [n for n in vars(module) if not n.startswith("_") and callable(getattr(module, n))]
        close = difflib.get_close_matches(attribute, public, n=1)
        hint = f"did you mean '{close[0]}'?" if close else "check the name"
        raise UserError(f"{kind} '{spec}': '{source}' has no attribute '{attribute}' ({hint})")
    found = getattr(module, attribute)
    if not callable(found):
        raise UserError(f"{kind} '{spec}': '{source}:{attribute}' is {a_kind(found)}, not a {noun} "
                        f"(point at {expected})")
    return found


def _from_import(module_name: str, spec: str, kind: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ImportError as e:
        raise UserError(f"{kind} '{spec}': cannot import module '{module_name}' ({e}); "
                        "check the spelling and that its folder is on PYTHONPATH") from e
    except Exception as e:  # the module's own top-level code failed: the user's bug, not ours
        raise UserError(f"{kind} '{spec}': importing module '{module_name}' raised {type(e).__name__}: {e} "
                        "(fix that module)") from e


def _from_file(path_text: str, spec: str, kind: str) -> ModuleType:
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise UserError(f"{kind} '{spec}': file '{path_text}' not found (give the path of a .py file)")
    # A name unique to the path, so two files both called rewards.py do not collide.
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    name = f"rlvr_user_{kind}_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise UserError(f"{kind} '{spec}': cannot load '{path_text}' as Python (give a .py file)")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # registered before running, as `import` does, for dataclasses and pickle
    for folder in _import_roots(path):  # (appended: an installed package keeps its name)
        if str(folder) not in sys.path:
            sys.path.append(str(folder))
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:  # the file's own top-level code failed: the user's bug, not ours
        del sys.modules[name]
        raise UserError(f"{kind} '{spec}': importing file '{path_text}' raised {type(e).__name__}: {e} "
                        "(fix that file)") from e
    return module


def _import_roots(path: Path) -> list[Path]:
    """Where a file's own imports are found, as when it runs as a script: its folder; and in the layout `openenv
    init` writes (server/x_environment.py importing `models`), the environment's root, its openenv.yaml's folder,
    from which its server runs."""
    roots = [path.parent]
    for folder in list(path.parents)[1:3]:
        if (folder / "openenv.yaml").is_file():
            roots.append(folder)
            break
    return roots
