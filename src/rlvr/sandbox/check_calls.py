"""Run a dataset's ``check(candidate)`` against a proxy (runs in its own sandbox, as a script).

``python -I check_calls.py test.py ENTRY_POINT``. The test file is the dataset's test code with
each ``assert`` rewritten by the parent into ``__rlvr_assert(lambda: <test>)``, so one failed
assertion is counted and the next still runs. ``candidate`` is a proxy: each call is written to
stdout as ``{"call": {"args": ..., "kwargs": ...}}`` and the parent writes back the candidate
process's reply, which was decoded and re-encoded as plain JSON on the way; the comparisons here
therefore only ever see builtins built by `plain.decode`. Other messages on stdout:
``{"assert": true|false}`` per assertion, and last ``{"done": "completed"|"aborted"|"harness",
"detail": "..."}``. The test's own prints go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

if __package__:  # imported as part of rlvr (tests)
    from rlvr.sandbox import plain
else:  # a script in the sandbox, next to a copy of plain.py; -I leaves that dir off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import plain  # type: ignore[no-redef]


class CandidateError(Exception):
    """A call to the candidate failed: it raised, exited, or returned a non-plain value."""


class HarnessError(BaseException):
    """The test itself cannot run (an argument that cannot be sent, a missing name).

    A BaseException, so neither the test's ``except Exception`` nor an assertion catches it.
    """


def make_candidate(send: Callable[[dict[str, Any]], None], replies: TextIO) -> Callable[..., Any]:
    """The proxy handed to ``check``: it forwards each call and decodes the reply."""

    def candidate(*args: Any, **kwargs: Any) -> Any:
        try:
            request = {"args": plain.encode(list(args)), "kwargs": plain.encode(kwargs)}
        except (plain.Unsupported, RecursionError) as exc:
            raise HarnessError(f"an argument cannot be sent to the candidate: {exc}") from None
        send({"call": request})
        reply = json.loads(replies.readline() or "null")
        if not isinstance(reply, dict) or "ok" not in reply:
            detail = reply.get("error") if isinstance(reply, dict) else "no reply"
            raise CandidateError(str(detail))
        try:
            return plain.decode(reply["ok"])
        except ValueError as exc:
            raise CandidateError(f"malformed result: {exc}") from None

    return candidate


def make_assert(send: Callable[[dict[str, Any]], None]) -> Callable[[Callable[[], Any]], None]:
    """What each rewritten ``assert`` calls: evaluate the test, report pass or fail, go on."""

    def check_assert(test: Callable[[], Any]) -> None:
        try:
            passed = bool(test())
        except NameError as exc:  # the test refers to something it never defined
            raise HarnessError(f"the test code failed: NameError: {exc}") from None
        except Exception:
            passed = False
        send({"assert": passed})

    return check_assert


def run(test_path: str, entry_point: str, send: Callable[[dict[str, Any]], None],
        replies: TextIO) -> dict[str, Any]:
    """Execute the test file and ``check(candidate)``; the final ``done`` message."""
    candidate = make_candidate(send, replies)
    namespace: dict[str, Any] = {"__name__": "test", "__rlvr_assert": make_assert(send),
                                 entry_point: candidate}
    try:
        with open(test_path, encoding="utf-8") as f:
            exec(compile(f.read(), "test.py", "exec"), namespace)
        namespace["check"](candidate)
    except HarnessError as exc:
        return {"done": "harness", "detail": str(exc)}
    except NameError as exc:
        return {"done": "harness", "detail": f"the test code failed: NameError: {exc}"}
    except BaseException as exc:
        return {"done": "aborted", "detail": f"{type(exc).__name__}: {exc}"[:500]}
    return {"done": "completed", "detail": ""}


def main() -> None:
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the test's prints must not land in the message channel

    def send(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    send(run(sys.argv[1], sys.argv[2], send, sys.stdin))


if __name__ == "__main__":
    main()
