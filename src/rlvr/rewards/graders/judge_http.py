"""A minimal client for an OpenAI-compatible ``POST {base_url}/chat/completions`` (stdlib only).

Failures are sorted by who can fix them:

- the server cannot be reached at all (connection refused, unknown host), after every try:
  `UserError`: nothing can be graded until the user starts the server or fixes ``base_url``;
- the server answers 401, 403 or 404: `UserError`: the key, the URL or the model is wrong;
- a timeout, a dropped connection, 429 or 5xx after every try, another 4xx, or a reply that is
  not a chat completion: `JudgeFailed`: that one request failed, its row is not scored (None),
  and a long training run goes on.

Connection errors, timeouts, 429 and 5xx are retried with exponential backoff.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, cast

from rlvr.errors import UserError

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})
CONFIG_STATUS = frozenset({401, 403, 404})  # wrong key, wrong URL or wrong model: every request would fail


class JudgeFailed(Exception):
    """One request to the judge failed for good; the row it was for is not scored."""


@dataclass(frozen=True)
class JudgeEndpoint:
    """Where the judge is and how patiently to ask it.

    >>> JudgeEndpoint("http://127.0.0.1:8000/v1/").url
    'http://127.0.0.1:8000/v1/chat/completions'
    """

    base_url: str
    api_key: str | None = None
    timeout_s: float = 30.0  # per try
    max_tries: int = 3
    backoff_s: float = 0.5  # wait before try k+1 is backoff_s * 2**(k-1)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def chat(self, body: dict[str, Any]) -> str:
        """The text of the judge's reply to `body` (a chat completion request)."""
        unreachable = False
        failure = ""
        for attempt in range(self.max_tries):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                return _reply_text(self._post(body))
            except urllib.error.HTTPError as e:  # before URLError: HTTPError is one
                if e.code not in RETRIED_STATUS:
                    raise self._refused(e) from e
                unreachable, failure = False, f"HTTP {e.code} {e.reason}"
            except urllib.error.URLError as e:  # urlopen wraps errors while connecting in URLError
                unreachable, failure = True, _describe(e.reason)
            except TimeoutError:
                unreachable, failure = False, f"no reply within timeout_s={self.timeout_s:g}"
            except (OSError, http.client.HTTPException) as e:  # e.g. the server hung up mid-reply
                unreachable, failure = False, f"connection lost ({_describe(e)})"
        tries = f"{self.max_tries} {'try' if self.max_tries == 1 else 'tries'}"
        if unreachable:
            raise UserError(
                f"LLM judge at {self.base_url} unreachable after {tries}: {failure} (start the server or fix base_url)"
            )
        raise JudgeFailed(f"judge failed after {tries}: {failure}")

    def _post(self, body: dict[str, Any]) -> bytes:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return cast(bytes, response.read())

    def _refused(self, error: urllib.error.HTTPError) -> Exception:
        """The error to raise for a status that retrying cannot fix."""
        detail = _body_snippet(error)
        if error.code in CONFIG_STATUS:
            return UserError(
                f"LLM judge at {self.base_url} answered HTTP {error.code} {error.reason}{detail} "
                "(check base_url, model and the API key in api_key_env)"
            )
        return JudgeFailed(f"judge answered HTTP {error.code} {error.reason}{detail}")


def _reply_text(raw: bytes) -> str:
    """``choices[0].message.content`` of a chat completion; JudgeFailed when it has none.

    >>> _reply_text(b'{"choices": [{"message": {"role": "assistant", "content": "0.8"}}]}')
    '0.8'
    """
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, LookupError, TypeError) as e:
        raise JudgeFailed(f"the judge's reply is not a chat completion: {raw[:80]!r}") from e
    if not isinstance(content, str):
        raise JudgeFailed(f"the judge's reply has no text content (content={content!r})")
    return content


def _describe(reason: object) -> str:
    """An OS error as its lowercase message ("connection refused"), anything else as str.

    >>> _describe(ConnectionRefusedError(111, "Connection refused"))
    'connection refused'
    """
    text = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
    return text[:1].lower() + text[1:]


def _body_snippet(error: urllib.error.HTTPError) -> str:
    try:
        body = error.read().decode("utf-8", "replace").strip()
    except OSError:
        body = ""
    return f": {body[:120]}" if body else ""
