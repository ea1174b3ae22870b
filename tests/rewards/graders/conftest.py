"""A tiny OpenAI-compatible chat server on 127.0.0.1, for the LLM-judge tests (no network needed)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rlvr.rewards.combine import grade_rows
from rlvr.rewards.graders.build import build_grader


def grade(reward, completions, items):
    """Grade rows with a reward function or a spec (a dict): their GradeResults, as `rlvr grade` writes them."""
    fn = build_grader(reward) if isinstance(reward, dict) else reward
    return grade_rows(getattr(fn, "__name__", "reward"), fn, completions, [dict(item) for item in items])


class FakeJudge:
    """What the server answers, and what it was asked; tests change the attributes."""

    def __init__(self):
        self.reply = lambda body: "0.5"  # request body -> the completion's text
        self.fail_first = 0  # answer this many requests with `fail_status` before behaving
        self.fail_status = 500
        self.delay_s = 0.0  # sleep before replying (timeout tests)
        self.raw_body = None  # bytes to send instead of a chat completion
        self.requests = []  # (headers, body) of every request received
        self.lock = threading.Lock()
        self.url = ""


def _handler(judge):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with judge.lock:
                judge.requests.append((dict(self.headers), body))
                failing = judge.fail_first > 0
                judge.fail_first -= failing
            if self.path != "/v1/chat/completions":
                return self._send(404, b'{"error": "no such route"}')
            if failing:
                return self._send(judge.fail_status, b'{"error": "try later"}')
            time.sleep(judge.delay_s)
            if judge.raw_body is not None:
                return self._send(200, judge.raw_body)
            reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": judge.reply(body)}}]}
            return self._send(200, json.dumps(reply).encode())

        def _send(self, status, payload):
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting: expected
                pass

        def log_message(self, *args):  # keep test output clean
            pass

    return Handler


@pytest.fixture
def fake_judge():
    """A FakeJudge served on a free loopback port; `fake_judge.url` is its base_url."""
    judge = FakeJudge()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(judge))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    judge.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield judge
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
