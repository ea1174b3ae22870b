"""`rlvr serve --tinker`: Tinker's training API (the `tinker` SDK's protocol, under /api/v1/) on this machine, over
rlvr's models, losses and sampler (rlvr.tinker.service). An unmodified SDK client talks to it with
`TINKER_BASE_URL=http://127.0.0.1:<port>` and any key of the SDK's form (`TINKER_API_KEY=tml-local`): nothing
checks the key, so the server listens on the loopback interface unless told otherwise.

A request the server cannot serve is answered with the SDK's error shape and one line naming the cause (400
{"detail": ...}, which the SDK raises as BadRequestError; a future's failure as RequestFailedError).
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rlvr.errors import UserError, first_line
from rlvr.tinker.service import Answer, Service
from rlvr.tinker.wire import PROTOBUF, WireError, read_forward_backward

POLL_S = 30.0  # how long retrieve_future waits for a result before "try again" (the SDK's poll times out at 45 s)
QUIET = {"client/config": {}, "client/dynamic_config": {}, "session_heartbeat": {"type": "session_heartbeat"},
         "telemetry": {"status": "accepted"}}  # (calls the SDK makes that change nothing here)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    service: Service

    @property
    def url(self) -> str:
        return f"http://{self.server_address[0]!s}:{self.server_address[1]}"

    def close(self, wait: bool = False) -> None:
        """The socket closed and the worker told to stop (after serve_forever has returned); `wait`: until the work
        under way is done."""
        self.server_close()
        self.service.worker.shutdown(wait=wait, cancel_futures=True)


def make_server(root: Path, host: str = "127.0.0.1", port: int = 0, cache_dir: str = "~/.cache/rlvr",
                aliases: dict[str, str] | None = None) -> _Server:
    """The server (not yet serving: call serve_forever), its checkpoints under `root`; port 0 picks a free one;
    `aliases`: base model names served as other models (rlvr.tinker.service.Service)."""
    root.mkdir(parents=True, exist_ok=True)
    server = _Server((host, port), _Handler)
    server.service = Service(root, cache_dir, aliases)
    return server


def serve(root: Path, host: str, port: int, cache_dir: str = "~/.cache/rlvr",
          aliases: dict[str, str] | None = None) -> None:
    server = make_server(root, host, port, cache_dir, aliases)
    print(f"rlvr: Tinker's API on {server.url} (TINKER_BASE_URL={server.url} TINKER_API_KEY=tml-local); checkpoints "
          f"in {root}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.close()


def started(root: Path | str, aliases: dict[str, str] | None = None, cache_dir: str = "~/.cache/rlvr") -> _Server:
    """A server of this process on a free loopback port (`.url`), serving on a daemon thread until `.shutdown()`
    (then `.close()`)."""
    server = make_server(Path(root), cache_dir=cache_dir, aliases=aliases)
    threading.Thread(target=server.serve_forever, name="rlvr-tinker-server", daemon=True).start()
    return server


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        route = self.path.split("?")[0].removeprefix("/api/v1/").strip("/")
        try:
            length = self.headers.get("Content-Length") or "0"
            if not length.isdigit():
                self.close_connection = True  # (the body cannot be read past: the connection ends with the answer)
                raise WireError(f"Content-Length {length!r} is not a number of bytes")
            self._answer(self._post(route, self.rfile.read(int(length))))
        except (WireError, UserError) as e:
            self._answer(({"detail": str(e)}, "json"), 404 if isinstance(e, _NotFound) else 400)
        except Exception as e:  # (rlvr's own failure, said as the server's; not retried by the SDK)
            self._answer(({"detail": f"rlvr's tinker server failed: {type(e).__name__}: {first_line(e)}"}, "json"),
                         500, retry=False)

    def _post(self, route: str, raw: bytes) -> Answer:
        service = self.server.service
        if route == "forward_backward":
            return service.forward_backward(read_forward_backward(raw)), "json"
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            raise WireError(f"the body of {route} is not JSON") from None
        if not isinstance(body, dict):
            raise WireError(f"the body of {route} is not a JSON object")
        if route in QUIET or (route.startswith("sessions/") and route.endswith("/finish")):
            return QUIET.get(route, {}), "json"
        if route == "retrieve_future":
            return service.retrieve(body, POLL_S)
        if route in ("save_weights", "save_weights_for_sampler"):
            return service.save_weights(body, "weights" if route == "save_weights" else "sampler_weights"), "json"
        handlers = {"create_session": service.create_session, "create_model": service.create_model,
                    "get_info": service.get_info, "optim_step": service.optim_step,
                    "load_weights": service.load_weights, "create_sampling_session": service.create_sampling_session,
                    "asample": service.asample}
        if route not in handlers:
            raise _NotFound(f"POST /api/v1/{route} is not served by rlvr's tinker server")
        return handlers[route](body), "json"

    def do_GET(self) -> None:
        route = self.path.split("?")[0].removeprefix("/api/v1/").strip("/")
        service = self.server.service
        try:
            if route == "healthz":
                self._answer(({"status": "ok"}, "json"))
            elif route == "get_server_capabilities":
                self._answer(({"supported_models": []}, "json"))
            elif route.startswith("samplers/"):
                self._answer((service.sampler(route.removeprefix("samplers/")), "json"))
            else:
                raise _NotFound(f"GET /api/v1/{route} is not served by rlvr's tinker server")
        except (WireError, UserError) as e:
            self._answer(({"detail": str(e)}, "json"), 404 if isinstance(e, _NotFound) else 400)

    def _answer(self, answer: Answer, status: int = 200, retry: bool = True) -> None:
        payload, kind = answer
        data = payload if kind == PROTOBUF else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", PROTOBUF if kind == PROTOBUF else "application/json")
        self.send_header("Content-Length", str(len(data)))
        if not retry:
            self.send_header("x-should-retry", "false")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _NotFound(WireError):
    """A route the server does not serve (404)."""


def service_client(root: Path | str = "runs/tinker", aliases: dict[str, str] | None = None,
                   cache_dir: str = "~/.cache/rlvr") -> Any:
    """A `tinker.ServiceClient` on a server of this process (on a free loopback port, in a daemon thread): Tinker
    loops from Python with no `rlvr serve` to start. The SDK still speaks HTTP to it; the server lives as long
    as the process."""
    import os

    import tinker

    os.environ.setdefault("TINKER_TELEMETRY", "0")  # (the SDK's telemetry goes nowhere here)
    return tinker.ServiceClient(base_url=started(root, aliases, cache_dir).url, api_key="tml-local")
