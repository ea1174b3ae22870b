"""The docstring examples of the task modules run (CI's pytest reads tests/ only)."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["__init__", "arithmetic", "countdown", "game24", "splits", "sudoku"])
def test_docstring_examples(name):
    module = importlib.import_module("rlvr.data.tasks" if name == "__init__" else f"rlvr.data.tasks.{name}")
    failed, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert attempted > 0 and failed == 0
