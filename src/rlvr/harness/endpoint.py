"""The policy as an OpenAI-compatible endpoint on the loopback interface, recording every completion it serves.

Each rollout gets a key and its own base URL, `http://127.0.0.1:<port>/r/<key>/v1`, so an unmodified `openai`
client (`OpenAI(base_url=..., api_key="x")`) talks to it; `POST .../chat/completions` (messages, tools, n,
max_tokens / max_completion_tokens, logprobs), `POST .../completions` (a text prompt) and `GET .../models` are
served, and `POST .../responses` (OpenAI's Responses API) and `POST .../messages` (Anthropic's Messages API),
each as the chat completion it is underneath (rlvr.harness.responses, rlvr.harness.messages); `POST .../rlvr/reward`
takes a reward for the rollout's latest turn. A key never
opened is refused (401), one whose rollout was finished too (410): its turns are final.

What is drawn is fixed by the run, not the agent:
- the distribution is the run's: a request's temperature, top_p, top_k and a budget above the run's are served at
  the run's values, and what the endpoint cannot give (JSON mode, a forced tool call, penalties) is a 400 naming
  the field: one rule, rlvr.harness.request; a prompt beyond the model's context is a 400, as vLLM answers it;
- request k of the rollout with these prompt ids draws from seed_of(rollout seed, hash of the ids, k), choice i
  from seed_of(that, i): concurrent calls and their order do not change what each draws (rlvr.seeds); the
  agent's own `seed` is ignored.

The response carries what verifiers and vLLM clients read back: `prompt_token_ids`, each choice's `token_ids`
and `logprobs.content`, `finish_reason` ("length" at the token budget, "tool_calls" when the model called one)
and `usage`; a turn whose answer could not be written whole (the client left) is taken back: nothing trains
on draws no agent saw. With `tools` offered, the model's calls come as `tool_calls` (rlvr.envs.template).
`stream: true` is answered as server-sent events, each choice whole in one chunk (and the usage in a last one
when `stream_options.include_usage` asks). A client's retry
(`x-stainless-retry-count` above 0, as the openai SDK sends it) of a request already answered gets that answer
again: a retry is never a new draw.
A request that continues a recorded turn gets that turn's ids verbatim as its prompt, the new
messages bridged by the chat template (rlvr.harness.splice): the model's text is never tokenised again.
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jinja2 import TemplateError
from tqdm import tqdm

from rlvr.envs.rollout import TurnFormat
from rlvr.envs.template import chat_prompt_ids, renders_tools, reply, text_prompt_ids
from rlvr.errors import first_line
from rlvr.harness.batcher import Batcher, Closed
from rlvr.harness.chat_events import chat_events
from rlvr.harness.messages import chat_body as messages_chat_body
from rlvr.harness.messages import message_events, message_of
from rlvr.harness.recorder import Recorder, Turn
from rlvr.harness.request import (
    TRAIN_FIELD,
    TRAIN_HEADER,
    Refused,
    Request,
    chat_messages,
    finite_number,
    in_words_of,
    json_object,
    legacy_completion_fields,
    read_request,
)
from rlvr.harness.responses import chat_body, response_events, response_of
from rlvr.harness.splice import spliced_prompt
from rlvr.harness.stops import at_stop
from rlvr.rollout import SamplingParams
from rlvr.samplers.protocol import Job, Sampled, Sampler
from rlvr.seeds import ids_hash, seed_of

ROUTES = ("chat/completions", "completions", "responses", "messages")
REWARD_ROUTE = "rlvr/reward"  # POST {"reward": x}: the reward of the rollout's latest turn (rlvr.harness.group.Link)
STREAMS = {"responses": response_events, "messages": message_events}  # (chat's: chat_events, with its usage)
MAX_IN_FLIGHT = 64  # requests of one rollout being answered at once: past it, an agent that floods is refused (429)


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


class _Server(ThreadingHTTPServer):
    """A thread per connection; a listen backlog for every rollout of a step connecting at once (the default of 5
    resets connections past it: an agent would see ConnectionResetError)."""

    daemon_threads = True
    request_queue_size = 4096


class Endpoint:
    """An OpenAI-compatible server over `sampler` (the policy's current weights), drawing under `params`."""

    def __init__(self, sampler: Sampler, tokenizer: Any, params: SamplingParams, *, model: str = "policy",
                 host: str = "127.0.0.1", context: int | None = None, strict: bool = False,
                 said: set[str] | None = None) -> None:
        """`context`: the model's, in tokens (None: not checked); `strict`: refuse what the run would serve at its
        own values (environment.strict_requests); `said`: what was said once already (the run's, across steps)."""
        self.tokenizer, self.params, self.model = tokenizer, params, model
        self.context, self.strict, self.said = context, strict, said if said is not None else set()
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

    def reward(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        """Rollout `key`'s report of a reward for its latest turn: {"turn": its number, "reward": the value}."""
        recorder = self.recorder(key)
        value: Any = body.get("reward")
        if not finite_number(value):
            raise Refused(400, f"'reward' must be a finite number, not {value!r}: POST {{\"reward\": 0.5}}")
        try:
            return {"turn": recorder.reward(float(value)), "reward": float(value)}
        except ValueError as e:
            raise Refused(400, str(e)) from None

    def answer(self, key: str, route: str, body: dict[str, Any], retry: bool = False) -> Served:
        """The JSON answer to `body` posted to `route` (chat/completions or completions) of rollout `key`, to be
        kept (its turns recorded) once it was written whole; a client's retry (`retry`) of a request already
        answered gets that answer again, not a new draw."""
        recorder = self.recorder(key)
        try:
            if route == "responses":  # (the chat completion it is underneath: rlvr.harness.responses)
                return self._respond(key, recorder, body, retry)
            if route == "messages":  # (Anthropic's: rlvr.harness.messages)
                served = self.answer(key, "chat/completions", messages_chat_body(body), retry)
                return Served(message_of(served.response), served.forget)
        except Refused as e:  # (said in the words of the API the client spoke)
            raise Refused(e.status, in_words_of(route, str(e))) from None
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

    def _respond(self, key: str, recorder: Recorder, body: dict[str, Any], retry: bool) -> Served:
        """A Responses request answered as its chat completion; the conversation kept under the response's id, for
        a later `previous_response_id`."""
        previous = body.get("previous_response_id")
        if previous is not None and previous not in recorder.conversations:
            raise Refused(400, f"previous_response_id={previous!r} is no response this rollout was served")
        chat = chat_body(body, recorder.conversations.get(previous) if previous is not None else None)
        served = self.answer(key, "chat/completions", chat, retry)
        response = response_of(served.response, body)
        recorder.conversations[response["id"]] = [*chat["messages"], served.response["choices"][0]["message"]]

        def forget() -> None:
            served.forget()
            recorder.conversations.pop(response["id"], None)

        return Served(response, forget)

    def _answer(self, recorder: Recorder, asked: str, route: str, body: dict[str, Any]) -> Served:
        request = read_request(body, self.params, self.strict)
        if route == "completions":
            legacy_completion_fields(body)
        chat = route == "chat/completions"
        if chat:  # (its messages as compared with the next request's: rlvr.harness.splice)
            body = {**body, "messages": chat_messages(body), "tools": request.tools}
        prompt_ids = self._prompt_ids(body, chat, recorder)
        budget = self._within_context(prompt_ids, request.max_tokens)
        self._note(request, recorder)
        request_seed = seed_of(recorder.seed, ids_hash(prompt_ids), recorder.request_index(prompt_ids))
        seeds = [seed_of(request_seed, i) for i in range(request.n)]
        try:
            done = self.batcher.submit([Job(prompt_ids, seed, budget) for seed in seeds]).result()
        except Closed as e:
            raise Refused(410, str(e)) from None
        cut = [at_stop(self.tokenizer, s, request.stops) for s in done]
        closed = [s.stopped and c[0] is s for s, c in zip(done, cut)]  # (not cut at a stop string)
        done, texts, matched = [d for d, _, _ in cut], [t for _, t, _ in cut], [m for _, _, m in cut]
        calls = request.tools if request.read_calls else None
        replies = [reply(self.tokenizer, text, calls) for text in texts] if chat else []
        turns = [Turn(prompt_ids, s.token_ids, s.logprobs, seed, "stop" if s.stopped else "length", body, i,
                      replies[i].message() if chat else None, s.floors, closed[i], request.trained)
                 for i, (s, seed) in enumerate(zip(done, seeds))]
        recorder.tool_parse_errors += sum(r.unreadable for r in replies)
        response = self._response(prompt_ids, done, turns, texts, matched)
        recorder.add(turns)  # (before the answer is written: an agent acts on it as soon as it arrives)
        recorder.answers[asked] = response

        def forget() -> None:  # (a client gone before the whole answer reached it: these draws were never seen)
            recorder.remove(turns)
            recorder.answers.pop(asked, None)

        return Served(response, forget)

    def _within_context(self, prompt_ids: list[int], budget: int) -> int:
        """`budget` cut to what the model's context leaves after the prompt; a prompt that leaves nothing: 400."""
        if self.context is None:
            return budget
        room = self.context - len(prompt_ids)
        if room < 1:
            raise Refused(400, f"the prompt has {len(prompt_ids)} tokens, and the model's context is {self.context}: "
                               "no room for a completion; shorten the conversation")
        return min(budget, room)

    def _note(self, request: Request, recorder: Recorder) -> None:
        """Count a request served otherwise than it asked, and say each kind once a run; say once a run that the
        model's template cannot show the tools offered."""
        if request.overridden:
            recorder.overridden += 1
        notes = {what.split("=")[0]: f"an agent asked {what}: served at the run's value (generation.*; each such "
                                     "request counted in env/overridden; environment.strict_requests: true refuses "
                                     "them)" for what in request.overridden}
        if request.tools and not renders_tools(self.tokenizer):
            notes["tools"] = ("an agent offers tools, but the model's chat template does not show them, so the model "
                              "cannot know of them (env/calls stays 0): use a model whose template renders tools "
                              "(Qwen2.5's does), or describe the tools in the prompt")
        for key, note in notes.items():
            if key not in self.said:
                self.said.add(key)
                tqdm.write(f"rlvr: {note}", file=sys.stderr)

    def _prompt_ids(self, body: dict[str, Any], chat: bool, recorder: Recorder) -> list[int]:
        """A chat request's ids continue the recorded turn it extends (rlvr.harness.splice), else are rendered
        whole; a text prompt's are its tokens."""
        if chat:
            messages = body["messages"]
            spliced = spliced_prompt(recorder.turns, messages, body.get("tools"), self.turn_format)
            if spliced is not None:
                return spliced
            try:
                return chat_prompt_ids(self.tokenizer, messages, body.get("tools"))
            except (TemplateError, ValueError, TypeError, KeyError) as e:  # (messages no template can take)
                raise Refused(400, f"the model's chat template cannot render these messages ({type(e).__name__}: "
                                   f"{first_line(e)}): check each message's role and content") from None
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise Refused(400, "prompt must be a non-empty string (one prompt per request)")
        return text_prompt_ids(self.tokenizer, prompt)

    def _response(self, prompt_ids: list[int], done: list[Sampled], turns: list[Turn], texts: list[str],
                  matched: list[str | None]) -> dict[str, Any]:
        choices = []
        chat = turns[0].message is not None
        for i, (sampled, turn, text) in enumerate(zip(done, turns, texts)):
            logprobs = {"content": [{"token": self.tokenizer.decode([t]), "logprob": lp, "top_logprobs": []}
                                    for t, lp in zip(sampled.token_ids, sampled.logprobs)]}
            choice: dict[str, Any] = {"index": i, "finish_reason": turn.finish_reason, "logprobs": logprobs,
                                      "token_ids": sampled.token_ids, "stop_reason": matched[i]}  # (vLLM's field)
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


def _handler(endpoint: Endpoint) -> type[BaseHTTPRequestHandler]:
    """The request handler class of `endpoint`'s server."""
    return type("Handler", (_Handler,), {"endpoint": endpoint})


class _Handler(BaseHTTPRequestHandler):
    endpoint: Endpoint  # (set by _handler)

    def do_POST(self) -> None:
        key, route = self._route()
        try:
            body = json_object(self.headers.get("Content-Length"), self.rfile)
            if route == REWARD_ROUTE:
                return self._send(200, self.endpoint.reward(key, body))
            if route not in ROUTES:
                raise Refused(404, f"no route {self.path}: POST <base_url>/{', /'.join(ROUTES)}")
            if body.get("stream") is not None and not isinstance(body["stream"], bool):  # ("yes" was streamed)
                raise Refused(400, f"stream={body['stream']!r}: give true or false")
            retry = (self.headers.get("x-stainless-retry-count") or "0") not in ("", "0")
            header = self.headers.get(TRAIN_HEADER)
            if header is not None:  # (the header's say, as the body's field would)
                body = {**body, TRAIN_FIELD: {"false": False, "true": True}.get(header.strip().lower(), header)}
            served = self.endpoint.answer(key, route, body, retry=retry)
            try:
                if body.get("stream") and route in STREAMS:
                    self._write(200, STREAMS[route](served.response), "text/event-stream")
                elif body.get("stream"):
                    usage = isinstance(body.get("stream_options"), dict) and body["stream_options"].get("include_usage")
                    self._write(200, chat_events(served.response, bool(usage)), "text/event-stream")
                else:
                    self._send(200, served.response)
            except (BrokenPipeError, ConnectionResetError):  # the client left: its draws are not kept
                served.forget()
        except Refused as e:  # (the top-level type: Anthropic's clients read it too)
            self._refuse(e)
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
            self._refuse(e)

    def _refused_method(self) -> None:
        self._refuse(Refused(405, f"{self.command} is not served: POST <base_url>/{', /'.join(ROUTES)}, or GET "
                                  "<base_url>/models"))

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _refused_method

    def _refuse(self, e: Refused) -> None:
        try:
            self._send(e.status, {"type": "error", "error": {"message": str(e), "type": "invalid_request_error",
                                                             "code": e.status}})
        except (BrokenPipeError, ConnectionResetError):  # (the client left before the answer)
            pass

    def _route(self) -> tuple[str, str]:
        """(key, route) of /r/<key>/v1/<route>; the key may come as the bearer token instead."""
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) >= 3 and parts[0] == "r" and parts[2] == "v1":
            return parts[1], "/".join(parts[3:])
        bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip() or \
            (self.headers.get("x-api-key") or "").strip()  # (Anthropic's header)
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
