"""The docstring examples of the reward-model modules run (pytest reads tests/ only)."""

import doctest
import importlib

import pytest

MODULES = ["bradley_terry", "model", "pairs", "scoring", "stats", "train"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"rlvr.reward_models.{name}")
    failed, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert attempted > 0 and failed == 0
