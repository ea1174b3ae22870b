"""Wall time per phase of a step."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Stopwatch:
    """`with clock("name"):` adds the block's wall time to clock.seconds["name"].

    >>> clock = Stopwatch()
    >>> with clock("rollout"):
    ...     pass
    >>> list(clock.seconds)
    ['rollout']
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
