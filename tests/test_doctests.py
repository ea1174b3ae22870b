"""Every docstring example in the package runs (pytest itself collects tests/ only)."""

import doctest
import importlib
import pkgutil

import pytest

import rlvr

MODULES = sorted(m.name for m in pkgutil.walk_packages(rlvr.__path__, prefix="rlvr.")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    failed, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert failed == 0


def test_the_examples_are_many():
    attempted = sum(doctest.testmod(importlib.import_module(n), report=False).attempted for n in MODULES)
    assert attempted > 150
