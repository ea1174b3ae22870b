"""The user's own code named in a config: `module.path:Name` or `path/to/file.py:Name` (rewards,
environments). Every failure to find or import it is one line naming the spec and the fix."""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from rlvr.errors import UserError


def load_user_object(spec: str, kind: str, noun: str, expected: str) -> Any:
    """The callable `spec` names; `kind` ("reward"), `noun` ("function") and `expected` ("a function taking …")
    word the errors."""
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
        raise UserError(f"{kind} '{spec}': '{source}:{attribute}' is a {type(found).__name__}, not a {noun} "
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
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:  # the file's own top-level code failed: the user's bug, not ours
        del sys.modules[name]
        raise UserError(f"{kind} '{spec}': importing file '{path_text}' raised {type(e).__name__}: {e} "
                        "(fix that file)") from e
    return module
