"""Fixtures for the sandbox tests."""

import pytest

from rlvr.sandbox import command

from .helpers import Tagged


@pytest.fixture
def tagged():
    """A fresh `Tagged`: programs carrying a unique token, and a scan for their survivors."""
    return Tagged()


@pytest.fixture
def no_bwrap(monkeypatch):
    """Pretend bubblewrap is missing, the user opted in to running code unisolated, and nobody has warned yet."""
    monkeypatch.setattr(command, "find_bwrap", lambda: None)
    monkeypatch.setattr(command, "_warned", False)
    monkeypatch.setenv(command.ISOLATION_ENV, command.UNISOLATED)


@pytest.fixture
def no_sandbox_no_opt_in(monkeypatch):
    """Bubblewrap missing, and no opt-in."""
    monkeypatch.setattr(command, "find_bwrap", lambda: None)
    monkeypatch.delenv(command.ISOLATION_ENV, raising=False)
