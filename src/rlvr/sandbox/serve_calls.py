"""Serve calls to the candidate's function (runs in the candidate's sandbox, as a script).

``python -I serve_calls.py solution.py ENTRY_POINT`` loads the solution, then answers one JSON
line per request on stdin, ``{"args": ..., "kwargs": ...}`` (encoded by `plain`), with one JSON
line on stdout: ``{"ok": <encoded result>}`` or ``{"error": "..."}``. The candidate's own prints
go to stderr. Nothing here is trusted: the candidate shares this process and may replace any of
it; the parent only ever reads JSON bytes from it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

if __package__:  # imported as part of rlvr (tests)
    from rlvr.sandbox import plain
else:  # a script in the sandbox, next to a copy of plain.py; -I leaves that dir off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import plain  # type: ignore[no-redef]

_MAX_MESSAGE = 500


def describe(exc: BaseException) -> str:
    """``Type: message``, safe against exceptions whose __str__ itself fails."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        text = type(exc).__name__
    return text[:_MAX_MESSAGE]


def load(path: str, entry_point: str) -> tuple[Callable[..., Any] | None, str | None]:
    """(the entry point, None), or (None, why not)."""
    namespace: dict[str, Any] = {"__name__": "solution", "__file__": path}
    try:
        with open(path, encoding="utf-8") as f:
            exec(compile(f.read(), path, "exec"), namespace)
    except BaseException as exc:
        return None, f"loading the solution raised {describe(exc)}"
    function = namespace.get(entry_point)
    if not callable(function):
        return None, f"the solution defines no function {entry_point!r}"
    return function, None


def call(function: Callable[..., Any], line: str) -> dict[str, Any]:
    """Answer one request line."""
    try:
        request = json.loads(line)
        args, kwargs = plain.decode(request["args"]), plain.decode(request["kwargs"])
        return {"ok": plain.encode(function(*args, **kwargs))}
    except BaseException as exc:
        return {"error": describe(exc)}


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the candidate's prints must not land in the reply channel
    requests = sys.stdin
    function, error = load(sys.argv[1], sys.argv[2])
    for line in requests:
        reply = {"error": error} if function is None else call(function, line)
        try:
            text = json.dumps(reply)
        except (ValueError, RecursionError) as exc:  # e.g. a list that contains itself
            text = json.dumps({"error": describe(exc)})
        replies.write(text + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
