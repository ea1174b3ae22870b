"""The vLLM server's faults, each one line within its deadline and no hang (rlvr.samplers.vllm_server):
nobody at the address, a server that stops answering a weight push, a server process that dies. A fake
server stands in for vLLM: these run without it."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

from rlvr.config import VLLMConfig
from rlvr.errors import UserError
from rlvr.rollout import SamplingParams
from rlvr.samplers.vllm import Job
from rlvr.samplers.vllm_server import Server, serve_command

CPU, F32 = torch.device("cpu"), torch.float32


class Stalls(BaseHTTPRequestHandler):
    """Healthy, but never answers a POST (a push or a generate that hangs)."""

    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def do_POST(self):
        time.sleep(30)

    def log_message(self, *args):
        pass


@pytest.fixture
def stalling_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Stalls)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_nobody_at_the_address_is_one_line_at_once(tmp_path):
    """A refused connection (no process listens at the url) is said at once, not after the whole timeout."""
    start = time.monotonic()
    with pytest.raises(UserError, match=r"nothing answers at generation.vllm.url=http://127.0.0.1:9 \(connection "
                                        r"refused\): start the server first"):
        Server(tmp_path, VLLMConfig(mode="server", url="http://127.0.0.1:9", timeout_s=60), CPU, F32, seed=0)
    assert time.monotonic() - start < 5


class Starting(Stalls):
    """Listening, but not ready: /health answers 503 (a server still loading its model)."""

    def do_GET(self):
        self.send_response(503)
        self.end_headers()


def test_a_server_that_is_never_ready_is_one_line_within_the_deadline(tmp_path):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Starting)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    start = time.monotonic()
    try:
        with pytest.raises(UserError, match=r"did not answer within generation.vllm.timeout_s=1 s"):
            Server(tmp_path, VLLMConfig(mode="server", url=f"http://127.0.0.1:{httpd.server_address[1]}",
                                        timeout_s=1), CPU, F32, seed=0)
    finally:
        httpd.shutdown()
    assert time.monotonic() - start < 10


def test_a_stalled_push_and_a_stalled_generate_end_in_one_line(tmp_path, stalling_server):
    server = Server(tmp_path, VLLMConfig(mode="server", url=stalling_server, timeout_s=1, exchange_dir=str(tmp_path)),
                    CPU, F32, seed=0)
    try:
        start = time.monotonic()
        with pytest.raises(UserError, match=r"did not answer /collective_rpc: .*timed out.*checkpoint is kept"):
            server.load([("w", torch.ones(2))], version=1)
        with pytest.raises(UserError, match=r"did not answer /inference/v1/generate"):
            server.generate([Job([1, 2], 7, 4)], SamplingParams(4, 1.0), stop_ids=[0])
        assert time.monotonic() - start < 10
    finally:
        server.close()
    assert not list(tmp_path.glob("rlvr-weights-*"))  # its exchange folder is gone


def test_a_server_that_dies_at_start_is_one_line_with_its_reason(tmp_path):
    fake = tmp_path / "python"  # "vllm serve" that fails as a broken install does
    fake.write_text("#!/bin/sh\necho 'ImportError: libcuda.so.1: cannot open shared object file' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(UserError, match=r"the vLLM server ended as it started \(exit 3\): ImportError: libcuda"):
        Server(tmp_path, VLLMConfig(mode="server", python=str(fake), timeout_s=30), CPU, F32, seed=0)


def test_the_serve_command_carries_the_settings(tmp_path):
    command = serve_command("py", Path("/m"), 8123, VLLMConfig(engine_args={"max_num_seqs": 64}), CPU, F32, seed=5)
    assert command[:5] == ["py", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"]
    joined = " ".join(command)
    for flag in ("--port 8123", "--tokens-only", "--load-format dummy", "--dtype float32", "--seed 5",
                 "--logprobs-mode processed_logprobs", "--worker-extension-cls rlvr.samplers.vllm_worker",
                 "--no-enable-chunked-prefill", "--max-num-seqs 64"):
        assert flag in joined, flag


def test_a_long_model_gets_a_batch_budget_that_holds_its_whole_prefill(tmp_path):
    """On a CPU the prefill is never split, so the batch budget must hold the longest prompt the model takes:
    the server and the in-process engine read it from the same place (engine.whole_prefill_tokens)."""
    from transformers import LlamaConfig

    LlamaConfig(max_position_embeddings=32768).save_pretrained(tmp_path)
    assert "--max-num-batched-tokens 32768" in " ".join(serve_command("py", tmp_path, 1, VLLMConfig(), CPU, F32, 0))
    assert "--max-num-batched-tokens 8192" in " ".join(serve_command("py", Path("/m"), 1, VLLMConfig(), CPU, F32, 0))


def test_no_room_for_the_weights_is_one_line(tmp_path, stalling_server, monkeypatch):
    import errno

    import safetensors.torch

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    server = Server(tmp_path, VLLMConfig(mode="server", url=stalling_server, timeout_s=1, exchange_dir=str(tmp_path)),
                    CPU, F32, seed=0)
    try:
        with pytest.raises(UserError, match=r"could not write the weights for the vLLM server in .*: No space left "
                                            r"on device \(free space there, or set generation.vllm.exchange_dir"):
            server.load([("w", torch.ones(2))], version=1)
        assert not (server.exchange / "weights").exists()
    finally:
        server.close()
