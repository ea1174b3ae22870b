"""Helpers for the sandbox tests: fast limits, a reward for a program, and a survivor check."""

import os
import time
import uuid

import pytest

from rlvr.rewards.code import code_tests
from rlvr.sandbox import Limits, sandbox_available

FAST = Limits(cpu_seconds=1, wall_seconds=2, memory_mb=256, processes=16)
"""Small limits so each attack ends within a few seconds."""

needs_bwrap = pytest.mark.skipif(
    not sandbox_available(),
    reason="bubblewrap is not installed or cannot create namespaces here (apt-get install bubblewrap)",
)


def reward(source: str, expected: str, stdin: str = "", limits: Limits = FAST) -> float | None:
    """The `code_tests` reward of a completion holding `source`, for one stdin/stdout case."""
    completion = f"Here is my solution:\n```python\n{source}\n```\n"
    return code_tests([completion], tests=[[{"input": stdin, "output": expected}]], limits=limits)[0]


class Tagged:
    """Programs carrying a unique token on their command line, so that any process they leave
    behind can be found from the host by scanning /proc/*/cmdline."""

    def __init__(self):
        self.token = f"rlvr-attack-{uuid.uuid4().hex}"

    def program(self, body: str) -> str:
        """A program that re-executes itself as ``python -c body TOKEN``; forks inherit the tag."""
        return f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', {body!r}, {self.token!r}])\n"

    def survivors(self, wait_seconds: float = 1.0) -> list[int]:
        """Host pids still tagged after up to `wait_seconds` (killed processes take a moment)."""
        deadline = time.monotonic() + wait_seconds
        while True:
            found = []
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) == os.getpid():
                    continue
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as f:
                        if self.token.encode() in f.read():
                            found.append(int(name))
                except OSError:
                    continue
            if not found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)
