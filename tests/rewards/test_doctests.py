"""The docstring examples of the reward modules run (CI's pytest reads tests/ only)."""

import doctest
import importlib

import pytest

MODULES = [
    "combine", "countdown", "format", "language", "loading", "math", "puzzles", "shaping", "symbolic", "text",
    "workers",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"rlvr.rewards.{name}")
    failed, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert attempted > 0 and failed == 0
