"""The vLLM engine as a server (generation.vllm.mode: server): a `vllm serve` process of its own, started
by the run (or already running at generation.vllm.url), for a GPU or a node of its own.

    completions  POST /inference/v1/generate   token ids + sampling params (one seed each) in, token ids and
                                               log-probs out (vLLM's token-in/token-out API; one request
                                               per completion, sent together)
    weights      the policy's tensors written as safetensors in generation.vllm.exchange_dir (/dev/shm when
                 there is one), then POST /collective_rpc rlvr_load (rlvr.samplers.vllm_worker) reads them
                 and returns their fingerprint as the server loaded them; POST /reset_prefix_cache
    its state    POST /collective_rpc rlvr_fingerprint

The dev endpoints need VLLM_SERVER_DEV_MODE=1 and rlvr's worker extension; a server the run starts has
both, a server at `url` must be started so (docs/backends.md). Every wait has a deadline
(generation.vllm.timeout_s) and fails in one line; the server the run started ends with it (SIGTERM at
close, and the kernel's PR_SET_PDEATHSIG if the run dies without closing it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import torch

from rlvr.config import VLLMConfig
from rlvr.errors import UserError
from rlvr.rollout import SamplingParams
from rlvr.samplers.engine import WORKER, sampling_params, whole_prefill_tokens
from rlvr.samplers.protocol import Job, Sampled
from rlvr.samplers.scratch import scratch_dir


def serve_command(python: str, folder: Path, port: int, settings: VLLMConfig, device: torch.device,
                  dtype: torch.dtype, seed: int) -> list[str]:
    """`vllm serve` of the model config in `folder` with dummy weights (the run pushes its own at once)."""
    flags: dict[str, Any] = {
        "host": "127.0.0.1", "port": port, "tokens-only": True, "skip-tokenizer-init": True,
        "load-format": "dummy", "dtype": str(dtype).removeprefix("torch."), "enforce-eager": True,
        "logprobs-mode": "processed_logprobs", "seed": seed, "worker-extension-cls": WORKER,
        "gpu-memory-utilization": settings.memory_share,
    }
    if device.type == "cpu":  # (as colocated: a prompt's prefill never split: engine.whole_prefill_tokens)
        flags |= {"no-enable-chunked-prefill": True, "max-num-batched-tokens": whole_prefill_tokens(folder)}
    flags |= {key.replace("_", "-"): value for key, value in settings.engine_args.items()}
    # (`vllm serve` itself reads the version of a package named "vllm", which the CPU build's is not)
    command = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder)]
    for key, value in flags.items():
        if value is True:
            command.append(f"--{key}")
        elif value is not False and value is not None:
            command += [f"--{key}", str(value)]
    return command


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A vLLM server behind the Engine protocol (rlvr.samplers.vllm)."""

    def __init__(self, folder: Path, settings: VLLMConfig, device: torch.device, dtype: torch.dtype,
                 seed: int, *, remove_folder: bool = False, pushes: bool = True) -> None:
        """`pushes`: this process hands the server its weights (with several ranks, rank 0 alone: the others
        sample from the same server and check what it holds)."""
        self.settings, self.timeout_s, self.process = settings, settings.timeout_s, None
        self.folder, self.remove_folder, self.pushes = folder, remove_folder, pushes
        shm = Path("/dev/shm")
        base = settings.exchange_dir or (str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None)
        self.exchange = scratch_dir("rlvr-weights-", base)
        self.log_path = self.exchange / "server.log"
        if settings.url:
            self.url = settings.url.rstrip("/")
        else:
            port = free_port()
            self.url = f"http://127.0.0.1:{port}"
            env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "VLLM_HOST_IP": "127.0.0.1"}
            if device.type == "cpu":
                env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(settings.kv_cache_gib))
            command = serve_command(settings.python or sys.executable, folder, port, settings, device, dtype, seed)
            with self.log_path.open("w") as log:
                # (a session of its own: a Ctrl-C at the terminal reaches the run, which finishes its step
                # through the server and then stops it, not the server in the middle of the step)
                self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, preexec_fn=_end_with_parent,
                                                start_new_session=True)
        self._wait_until_up()
        self.pool = ThreadPoolExecutor(max_workers=64)

    # ── the protocol ─────────────────────────────────────────────────────────────────────────
    def generate(self, jobs: Sequence[Job], params: SamplingParams, stop_ids: list[int],
                 on_done: Callable[[int, Sampled], None] | None = None) -> list[Sampled]:
        def one(job: Job) -> Sampled:
            body = {"token_ids": job.ids, "sampling_params": sampling_params(params, job, stop_ids)}
            choice = self._post("/inference/v1/generate", body)["choices"][0]
            content = (choice.get("logprobs") or {}).get("content") or []
            ids = list(choice.get("token_ids") or [])
            return Sampled(ids, [float(c["logprob"]) for c in content][:len(ids)],
                           stopped=choice.get("finish_reason") == "stop")

        futures = {self.pool.submit(one, job): i for i, job in enumerate(jobs)}
        out: list[Sampled | None] = [None] * len(jobs)
        try:
            for future in as_completed(futures):  # (on this thread, in the order they end)
                i = futures[future]
                out[i] = future.result()
                if on_done is not None:
                    on_done(i, out[i])  # type: ignore[arg-type]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return out  # type: ignore[return-value]

    def load(self, named_tensors: list[tuple[str, torch.Tensor]], version: int) -> None:
        from safetensors.torch import save_file

        if not self.pushes:  # (rank 0 pushes the same weights)
            return
        folder = self.exchange / "weights"
        shutil.rmtree(folder, ignore_errors=True)
        try:
            folder.mkdir()
            # (tied weights share storage, which safetensors refuses: each its own contiguous copy)
            save_file({name: t.detach().to("cpu").contiguous().clone() for name, t in named_tensors},
                      str(folder / "model.safetensors"))
        except OSError as e:  # (a full /dev/shm, say)
            shutil.rmtree(folder, ignore_errors=True)
            raise UserError(f"could not write the weights for the vLLM server in {folder}: {e.strerror or e} "
                            "(free space there, or set generation.vllm.exchange_dir; the last checkpoint is "
                            "kept)") from None
        self._rpc("rlvr_load", folder=str(folder), version=str(version))
        self._post("/reset_prefix_cache", None)
        shutil.rmtree(folder, ignore_errors=True)

    def loaded(self) -> tuple[int, str]:
        version, fingerprint = self._rpc("rlvr_fingerprint")
        return int(version), str(fingerprint)

    def close(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:  # (its session: the server and the engine processes it started)
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.exchange, ignore_errors=True)
        if self.remove_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    # ── HTTP, each wait under the deadline ───────────────────────────────────────────────────
    def _wait_until_up(self) -> None:
        due = time.monotonic() + self.timeout_s
        while time.monotonic() < due:
            if self.process is not None and self.process.poll() is not None:
                line, saved = self._last_log_line(), self._keep_log()
                self.close()
                raise UserError(f"the vLLM server ended as it started (exit {self.process.returncode}): {line} "
                                f"(its log: {saved})")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError) as e:
                if self.process is None and _refused(e):  # a server of yours that nothing answers for: no wait
                    self.close()
                    raise UserError(f"nothing answers at generation.vllm.url={self.url} (connection refused): start "
                                    "the server first, or leave the url empty for rlvr to start one") from None
            time.sleep(0.5)
        self.close()
        raise UserError(f"the vLLM server at {self.url} did not answer within generation.vllm.timeout_s="
                        f"{self.timeout_s:g} s (is it running, started with rlvr's worker extension? raise the "
                        "limit for a large model)")

    def _post(self, path: str, body: dict[str, Any] | None) -> Any:
        data = json.dumps(body).encode() if body is not None else b""
        request = urllib.request.Request(f"{self.url}{path}", data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:300].replace("\n", " ")
            raise UserError(f"the vLLM server refused {path} (HTTP {e.code}): {detail}") from None
        except (urllib.error.URLError, OSError) as e:  # (a timeout too)
            ended = self.process is not None and self.process.poll() is not None
            why = f"it ended (exit {self.process.returncode}): {self._last_log_line()}" if ended and self.process \
                else f"{getattr(e, 'reason', e)}"
            raise UserError(f"the vLLM server at {self.url} did not answer {path}: {why} (generation.vllm."
                            f"timeout_s={self.timeout_s:g}; the last checkpoint is kept)") from None
        return json.loads(text) if text else None

    def _rpc(self, method: str, **kwargs: str) -> Any:
        answer = self._post("/collective_rpc", {"method": method, "kwargs": kwargs, "timeout": self.timeout_s})
        return answer["results"][0]

    def _keep_log(self) -> Path:
        """The server's log, copied out of the exchange folder that close() removes."""
        kept = Path(tempfile.gettempdir()) / f"rlvr-vllm-server-{os.getpid()}.log"
        try:
            shutil.copyfile(self.log_path, kept)
        except OSError:
            return self.log_path
        return kept

    def _last_log_line(self) -> str:
        try:
            lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "no log"
        errors = [line for line in lines if "Error" in line or "error" in line]
        return (errors or lines or ["no output"])[-1].strip()[:300]


def _end_with_parent() -> None:
    """In the server's process, before it runs vLLM: SIGTERM when the run's process dies (rlvr.lifeline)."""
    from rlvr.lifeline import end_with_parent

    end_with_parent()


def _refused(error: BaseException) -> bool:
    """Whether `error` (urllib's, or the socket's under it) is a refused connection: no process listens there.

    >>> _refused(urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))), _refused(TimeoutError())
    (True, False)
    """
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    return isinstance(reason, ConnectionRefusedError)
