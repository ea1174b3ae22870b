"""Fixtures for the sandbox tests."""

import pytest

from .helpers import Tagged


@pytest.fixture
def tagged():
    """A fresh `Tagged`: programs carrying a unique token, and a scan for their survivors."""
    return Tagged()
