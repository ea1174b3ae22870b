"""The policy as an OpenAI-compatible endpoint on the loopback interface, recording every completion it serves.

Each rollout gets a key and its own base URL, `http://127.0.0.1:<port>/r/<key>/v1`, so an unmodified `openai`
client (`OpenAI(base_url=..., api_key="x")`) talks to it; `POST .../chat/completions` (messages, tools, n,
max_tokens / max_completion_tokens, logprobs), `POST .../completions` (a text prompt) and `GET .../models` are
served. A key never opened is refused (401), one whose rollout was finished too (410): its turns are final.

What is drawn is fixed by the run, not the agent:
- temperature, top_p and top_k must be the run's (generation.*) or absent: the trained log-probs are of that
  distribution (a different one is a 400 naming the field); the agent's own `seed` is ignored;
- request k of the rollout with these prompt ids draws from seed_of(rollout seed, hash of the ids, k), choice i
  from seed_of(that, i): concurrent calls and their order do not change what each draws (rlvr.seeds).

The response carries what verifiers and vLLM clients read back: `prompt_token_ids`, each choice's `token_ids`
and `logprobs.content`, `finish_reason` ("length" at the token budget, "tool_calls" when the model called one)
and `usage`; a turn whose answer could not be written whole (the client left) is taken back: nothing trains
on draws no agent saw. With `tools` offered, the model's calls come as `tool_calls` (rlvr.envs.template).
`stream: true` is answered as server-sent events, each choice whole in one chunk. A client's retry
(`x-stainless-retry-count` above 0, as the openai SDK sends it) of a request already answered gets that answer
again: a retry is never a new draw.
A request that continues a recorded turn gets that turn's ids verbatim as its prompt, the new
messages bridged by the chat template (rlvr.harness.splice): the model's text is never tokenised again.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rlvr.envs.rollout import TurnFormat
from rlvr.envs.template import chat_prompt_ids, completion_text, first_prefix, reply, text_prompt_ids
from rlvr.errors import first_line
from rlvr.harness.batcher import Batcher, Closed
from rlvr.harness.recorder import Recorder, Turn
from rlvr.harness.splice import spliced_prompt
from rlvr.rollout import SamplingParams
from rlvr.samplers.protocol import Job, Sampled, Sampler
from rlvr.seeds import seed_of

MAX_CHOICES = 16
MAX_IN_FLIGHT = 64  # requests of one rollout being answered at once: past it, an agent that floods is refused (429)


class Refused(Exception):
    """A request the endpoint answers with an HTTP error: its status and a message naming the cause."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Served:
    """An answer, its turns recorded, and what takes them back if it could not be written whole."""

    response: dict[str, Any]
    forget: Callable[[], None]


@dataclass(frozen=True)
class RolloutKey:
    """One rollout's access to the endpoint: its key, the base URL an OpenAI client is given, and its turns."""

    key: str
    base_url: str
    recorder: Recorder


def _stop_strings(body: dict[str, Any]) -> list[str]:
    """The request's `stop`: a string or a list of up to 4 (OpenAI's limit), none empty; else a 400."""
    stop = body.get("stop")
    stops = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or len(stops) > 4 or not all(isinstance(x, str) and x for x in stops):
        raise Refused(400, f"stop={stop!r}: give a string or a list of up to 4 non-empty strings")
    return stops


def _at_stop(tokenizer: Any, sampled: Sampled, stops: list[str]) -> tuple[Sampled, str]:
    """The draw cut at its first token whose text completes a stop string, and the text before that string (the
    tokens after it were never decoded for the agent: each token depends only on those before it, so the cut
    draw is exactly what decoding that stopped there draws); the whole draw and text without a stop."""
    text = completion_text(tokenizer, sampled.token_ids)
    if not stops or not any(x in text for x in stops):
        return sampled, text
    def head(k: int) -> str:
        return completion_text(tokenizer, sampled.token_ids[:k])

    k = first_prefix(len(sampled.token_ids), lambda k: any(x in head(k) for x in stops))
    text = head(k)
    cut = min(text.index(x) for x in stops if x in text)
    floors = None if sampled.floors is None else sampled.floors[:k]
    return Sampled(sampled.token_ids[:k], sampled.logprobs[:k], True, floors), text[:cut]


def _chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat request's messages, each with text content (or none), else refused (400)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise Refused(400, "messages must be a non-empty list of {role, content} objects")
    return [_text_content(m, i) for i, m in enumerate(messages)]


def _text_content(message: dict[str, Any], i: int) -> dict[str, Any]:
    """A message whose content is text: OpenAI's content parts ([{"type": "text", "text": ...}]) joined; None, or
    no content (an assistant message of tool calls), kept; anything else refused (400) naming the message."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return message
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                         and isinstance(p.get("text"), str) for p in content):
        return {**message, "content": "".join(p["text"] for p in content)}
    raise Refused(400, f"messages[{i}].content is {type(content).__name__} {str(content)[:60]!r}: give text, or "
                       "a list of {type: text, text} parts")


class _Server(ThreadingHTTPServer):
    """A thread per connection; a listen backlog for every rollout of a step connecting at once (the default of 5
    resets connections past it: an agent would see ConnectionResetError)."""

    daemon_threads = True
    request_queue_size = 4096


class Endpoint:
    """An OpenAI-compatible server over `sampler` (the policy's current weights), drawing under `params`."""

    def __init__(self, sampler: Sampler, tokenizer: Any, params: SamplingParams, *, model: str = "policy",
                 host: str = "127.0.0.1") -> None:
        self.tokenizer, self.params, self.model = tokenizer, params, model
        self.turn_format = TurnFormat.of(tokenizer)
        self.batcher = Batcher(sampler, params)
        self._open: dict[str, Recorder] = {}
        self._finished: set[str] = set()
        self.failures: list[str] = []  # the sampler's (or this endpoint's own) failures, each answered with a 500
        self._lock = threading.Lock()
        self.server = _Server((host, 0), _handler(self))
        self._thread = threading.Thread(target=self.server.serve_forever, name="rlvr-harness-endpoint", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def open(self, seed: int) -> RolloutKey:
        """A new rollout drawing from `seed`: its key and base URL."""
        key = secrets.token_hex(12)
        recorder = Recorder(seed)
        with self._lock:
            self._open[key] = recorder
        return RolloutKey(key, f"{self.url}/r/{key}/v1", recorder)

    def finish(self, key: str) -> list[Turn]:
        """The rollout's turns, final: later requests with its key are refused (410)."""
        with self._lock:
            recorder = self._open.pop(key)
            self._finished.add(key)
        return recorder.turns

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.batcher.close()

    def recorder(self, key: str) -> Recorder:
        with self._lock:
            if key in self._open:
                return self._open[key]
            if key in self._finished:
                raise Refused(410, "this rollout has finished: its turns are final, and a call after it is not served")
        raise Refused(401, "unknown rollout key: use the base URL the rollout was given")

    def answer(self, key: str, route: str, body: dict[str, Any], retry: bool = False) -> Served:
        """The JSON answer to `body` posted to `route` (chat/completions or completions) of rollout `key`, to be
        kept (its turns recorded) once it was written whole; a client's retry (`retry`) of a request already
        answered gets that answer again, not a new draw."""
        recorder = self.recorder(key)
        asked = json.dumps([route, body], sort_keys=True)
        if retry and asked in recorder.answers:
            return Served(recorder.answers[asked], lambda: None)  # (kept: the first answer was)
        if not recorder.enter(MAX_IN_FLIGHT):
            raise Refused(429, f"more than {MAX_IN_FLIGHT} requests of this rollout at once: wait for answers "
                               "before asking more")
        try:
            return self._answer(recorder, asked, route, body)
        finally:
            recorder.leave()

    def _answer(self, recorder: Recorder, asked: str, route: str, body: dict[str, Any]) -> Served:
        self._check_sampling(body)
        budget = self._budget(body)
        n = body.get("n", 1)
        if not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
            raise Refused(400, f"n={n!r}: ask for 1 to {MAX_CHOICES} choices")
        chat = route == "chat/completions"
        if chat:  # (its messages as compared with the next request's: rlvr.harness.splice)
            body = {**body, "messages": _chat_messages(body)}
        prompt_ids = self._prompt_ids(body, chat, recorder)
        request_seed = seed_of(recorder.seed, _content_hash(prompt_ids), recorder.request_index(prompt_ids))
        seeds = [seed_of(request_seed, i) for i in range(n)]
        stops = _stop_strings(body)
        try:
            done = self.batcher.submit([Job(prompt_ids, seed, budget) for seed in seeds]).result()
        except Closed as e:
            raise Refused(410, str(e)) from None
        cut = [_at_stop(self.tokenizer, s, stops) for s in done]
        closed = [s.stopped and c[0] is s for s, c in zip(done, cut)]  # (not cut at a stop string)
        done, texts = [d for d, _ in cut], [t for _, t in cut]
        replies = [reply(self.tokenizer, text, body.get("tools")) for text in texts] if chat else []
        turns = [Turn(prompt_ids, s.token_ids, s.logprobs, seed, "stop" if s.stopped else "length", body, i,
                      replies[i].message() if chat else None, s.floors, closed[i])
                 for i, (s, seed) in enumerate(zip(done, seeds))]
        recorder.tool_parse_errors += sum(r.unreadable for r in replies)
        response = self._response(prompt_ids, done, turns, texts)
        recorder.add(turns)  # (before the answer is written: an agent acts on it as soon as it arrives)
        recorder.answers[asked] = response

        def forget() -> None:  # (a client gone before the whole answer reached it: these draws were never seen)
            recorder.remove(turns)
            recorder.answers.pop(asked, None)

        return Served(response, forget)

    def _check_sampling(self, body: dict[str, Any]) -> None:
        run = {"temperature": self.params.temperature, "top_p": self.params.top_p, "top_k": self.params.top_k}
        for name, value in run.items():
            given = body.get(name)
            if given is not None and float(given) != float(value):
                raise Refused(400, f"{name}={given} differs from the run's {value} (generation.{name}): the log-probs "
                                   f"trained on are of the run's distribution; leave {name} out")

    def _budget(self, body: dict[str, Any]) -> int:
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        if asked is None:
            return self.params.max_new_tokens
        if not isinstance(asked, int) or not 1 <= asked <= self.params.max_new_tokens:
            raise Refused(400, f"max_tokens={asked!r}: ask for 1 to {self.params.max_new_tokens} tokens "
                               "(generation.max_new_tokens)")
        return asked

    def _prompt_ids(self, body: dict[str, Any], chat: bool, recorder: Recorder) -> list[int]:
        """A chat request's ids continue the recorded turn it extends (rlvr.harness.splice), else are rendered
        whole; a text prompt's are its tokens."""
        if chat:
            messages = body["messages"]
            spliced = spliced_prompt(recorder.turns, messages, body.get("tools"), self.turn_format)
            return spliced if spliced is not None else chat_prompt_ids(self.tokenizer, messages, body.get("tools"))
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise Refused(400, "prompt must be a non-empty string (one prompt per request)")
        return text_prompt_ids(self.tokenizer, prompt)

    def _response(self, prompt_ids: list[int], done: list[Sampled], turns: list[Turn],
                  texts: list[str]) -> dict[str, Any]:
        choices = []
        chat = turns[0].message is not None
        for i, (sampled, turn, text) in enumerate(zip(done, turns, texts)):
            logprobs = {"content": [{"token": self.tokenizer.decode([t]), "logprob": lp, "top_logprobs": []}
                                    for t, lp in zip(sampled.token_ids, sampled.logprobs)]}
            choice: dict[str, Any] = {"index": i, "finish_reason": turn.finish_reason, "logprobs": logprobs,
                                      "token_ids": sampled.token_ids}
            if turn.message is not None:
                choice["message"] = turn.message
                if turn.message.get("tool_calls") and turn.finish_reason == "stop":
                    choice["finish_reason"] = "tool_calls"
            else:
                choice["text"] = text
            choices.append(choice)
        completion_tokens = sum(len(s.token_ids) for s in done)
        return {"id": f"{'chatcmpl' if chat else 'cmpl'}-{secrets.token_hex(8)}",
                "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                "model": self.model, "choices": choices, "prompt_token_ids": prompt_ids,
                "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": completion_tokens,
                          "total_tokens": len(prompt_ids) + completion_tokens}}


def _content_hash(ids: list[int]) -> int:
    return int.from_bytes(hashlib.blake2b(json.dumps(ids).encode(), digest_size=8).digest(), "little")


def _handler(endpoint: Endpoint) -> type[BaseHTTPRequestHandler]:
    """The request handler class of `endpoint`'s server."""
    return type("Handler", (_Handler,), {"endpoint": endpoint})


class _Handler(BaseHTTPRequestHandler):
    endpoint: Endpoint  # (set by _handler)

    def do_POST(self) -> None:
        key, route = self._route()
        try:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                raise Refused(400, "the body is not JSON") from None
            if route not in ("chat/completions", "completions") or not isinstance(body, dict):
                raise Refused(404, f"no route {self.path}: POST <base_url>/chat/completions or /completions")
            retry = (self.headers.get("x-stainless-retry-count") or "0") not in ("", "0")
            served = self.endpoint.answer(key, route, body, retry=retry)
            try:
                if body.get("stream"):
                    self._write(200, _events(served.response), "text/event-stream")
                else:
                    self._send(200, served.response)
            except (BrokenPipeError, ConnectionResetError):  # the client left: its draws are not kept
                served.forget()
        except Refused as e:
            self._send(e.status, {"error": {"message": str(e), "type": "invalid_request_error", "code": e.status}})
        except Exception as e:  # the sampler's or the endpoint's own failure: the agent hears of it, the run's
            # side (the rollout's deadline, the sampler's) decides what it means
            self.endpoint.failures.append(f"{type(e).__name__}: {first_line(e)}")
            self._send(500, {"error": {"message": f"rlvr's endpoint failed: {type(e).__name__}: {e}",
                                       "type": "server_error", "code": 500}})

    def do_GET(self) -> None:
        key, route = self._route()
        try:
            self.endpoint.recorder(key)
            if route != "models":
                raise Refused(404, f"no route {self.path}: GET <base_url>/models")
            self._send(200, {"object": "list", "data": [{"id": self.endpoint.model, "object": "model",
                                                          "owned_by": "rlvr"}]})
        except Refused as e:
            self._send(e.status, {"error": {"message": str(e), "type": "invalid_request_error", "code": e.status}})

    def _route(self) -> tuple[str, str]:
        """(key, route) of /r/<key>/v1/<route>; the key may come as the bearer token instead."""
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) >= 3 and parts[0] == "r" and parts[2] == "v1":
            return parts[1], "/".join(parts[3:])
        bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        return bearer, "/".join(parts[1:]) if parts[:1] == ["v1"] else "/".join(parts)

    def _send(self, status: int, answer: dict[str, Any]) -> None:
        self._write(status, json.dumps(answer), "application/json")

    def _write(self, status: int, text: str, kind: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # (quiet: the run's console is the trainer's)
        pass


def _events(answer: dict[str, Any]) -> str:
    """A streamed answer as server-sent events: the whole of each choice in one chunk, then its end, then [DONE]."""
    chat = answer["object"] == "chat.completion"
    head = {"id": answer["id"], "created": answer["created"], "model": answer["model"],
            "object": "chat.completion.chunk" if chat else "text_completion"}
    events = []
    for choice in answer["choices"]:
        end = choice["finish_reason"]
        if chat:
            delta = dict(choice["message"])
            if "tool_calls" in delta:  # (a streamed call carries its index)
                delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(delta["tool_calls"])]
            pieces = [{"delta": delta, "finish_reason": None}, {"delta": {}, "finish_reason": end}]
        else:
            pieces = [{"text": choice["text"], "finish_reason": None}, {"text": "", "finish_reason": end}]
        events += [{**head, "choices": [{"index": choice["index"], **piece}]} for piece in pieces]
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
