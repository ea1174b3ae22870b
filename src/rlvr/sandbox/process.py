"""One running sandboxed process tree: its pipes, its byte cap, its clock and its watchdog.

`SandboxProcess` is the single place that touches the child. `run_python` drives it to the end
in one go; the function-test relay (`calls.py`) talks to two of them line by line. Output is read
in chunks as it arrives and never kept beyond `Limits.output_bytes`; every exit path, normal or
not, ends in `_kill_tree`, which leaves nothing running.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
import uuid
from typing import TYPE_CHECKING, Any, Literal

from rlvr.sandbox import command, tree, uids
from rlvr.sandbox.limits import Limits, RunResult, Status

if TYPE_CHECKING:
    from _typeshed import HasFileno

KillReason = Literal["timeout", "output_limit", "processes"]

SCAN_SECONDS = 0.02
"""How often the watchdog counts the tree. Where the kernel holds the tree (RLIMIT_NPROC) this is a
second line; where it cannot, a fork bomb beside busy cores can outrun it (`command.process_cap`)."""
EXIT_GRACE_SECONDS = 0.2
"""How long to keep reading after the main process exits, before killing whatever holds the pipes."""
_CHUNK = 65536
TMP_DIR = ".tmp"
"""Unisolated: the candidate's temporary folder (TMPDIR), inside its working directory and removed with it."""


class SandboxProcess:
    """A started sandbox: feed it with `send`, read it with `read_line` or `finish`."""

    def __init__(self, script: list[str], host_dir: str, limits: Limits) -> None:
        """Start `script` (interpreter arguments, e.g. ``["main.py"]``) on the files in `host_dir`."""
        self.limits = limits
        self.started_at = time.monotonic()
        self.deadline = self.started_at + limits.wall_seconds
        self.started: bool | None = None  # None until the launcher's marker has (not) arrived
        self.kill_reason: KillReason | None = None
        self.popen: subprocess.Popen[bytes] | None = None
        self.sandboxed = False
        self._stdout = bytearray()
        self._stderr = bytearray()
        self._to_send = bytearray()
        self._close_after_send = False
        self._seen: set[tree.Proc] = set()
        self._last_scan = 0.0
        self._exited_at: float | None = None
        self._closed = False
        self._token = f"RLVR_SANDBOX_TOKEN={uuid.uuid4().hex}"
        self._selector = selectors.DefaultSelector()
        self._lease: uids.Lease | None = None  # as root: the uid the candidate has to itself
        self.error = self._spawn(script, host_dir)

    def _spawn(self, script: list[str], host_dir: str) -> str | None:
        """Start the child; the reason it could not start, or None."""
        # As root, the candidate runs under a uid of its own (else, unisolated, as 'nobody'), which may neither
        # signal this process or the other candidates nor read this process's memory, environment or private
        # files, and whose processes the kernel counts (RLIMIT_NPROC does nothing for root).
        self._lease = uids.lease()
        uid, spec = (None if self._lease is None else self._lease.uid), None
        try:
            spec = command.sandbox_command(host_dir, self.limits, script, uid)
        finally:  # no interpreter, no sandbox and no opt-in (a UserError), or an interrupt: the uid goes back
            if spec is None and self._lease is not None:
                self._lease.release()
        if spec is None:
            who = " that the user 'nobody' may run (install python3 system-wide)" if command.unprivileged_user() else ""
            return f"no python interpreter found for the sandbox{who}"
        argv, self.sandboxed = spec
        # bwrap's own init keeps the environment it was started with, readable in
        # /proc/1/environ: give it nothing worth reading. The token lets cleanup find daemons.
        env = {"PATH": command.PATH, "LANG": "C.UTF-8", "HOME": host_dir,
               self._token.split("=")[0]: self._token.split("=")[1]}
        # Unisolated, this process switches the candidate's uid; under bubblewrap the launcher does.
        user = None if self.sandboxed else command.unprivileged_user()
        if user is not None and self._lease is not None:
            user = (self._lease.uid, self._lease.uid)
        try:
            if not self.sandboxed:  # its temporary files in its own folder (bubblewrap gives it its own /tmp)
                tmp = os.path.join(host_dir, TMP_DIR)
                os.makedirs(tmp, exist_ok=True)
                env.update(TMPDIR=tmp, TEMP=tmp, TMP=tmp)
            if user is not None:
                _give_to(host_dir, *user)
            ids: dict[str, Any] = {} if user is None else {"user": user[0], "group": user[1], "extra_groups": []}
            self.popen = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=host_dir, env=env, start_new_session=True, close_fds=True, **ids)
        except OSError as exc:
            if self._lease is not None:
                self._lease.release()
            return f"could not start the sandbox: {exc}"
        for stream in (self.popen.stdout, self.popen.stderr):
            assert stream is not None
            os.set_blocking(stream.fileno(), False)
            self._selector.register(stream, selectors.EVENT_READ)
        assert self.popen.stdin is not None
        os.set_blocking(self.popen.stdin.fileno(), False)
        return None

    # -- talking to the child ------------------------------------------------------------

    def send(self, data: bytes, close: bool = False) -> None:
        """Queue bytes for the child's stdin (written as it reads); `close` sends EOF after."""
        if self.popen is None or self.popen.stdin is None or self.popen.stdin.closed:
            return
        self._to_send += data
        self._close_after_send = self._close_after_send or close
        if not any(key.fileobj is self.popen.stdin for key in self._selector.get_map().values()):
            self._selector.register(self.popen.stdin, selectors.EVENT_WRITE)

    def read_line(self) -> bytes | None:
        """The next stdout line without its newline; None once the child is gone or killed."""
        while b"\n" not in self._stdout:
            if not self._pump():
                return None
        line, _, rest = self._stdout.partition(b"\n")
        self._stdout = bytearray(rest)
        return bytes(line)

    def finish(self) -> RunResult:
        """Run to the end (exit, wall clock or a limit), clean up, and report."""
        while self._pump():
            pass
        self._kill_tree()
        return self._result()

    def kill(self, reason: KillReason) -> None:
        """Stop the whole tree now; the first reason given is the one reported."""
        self.kill_reason = self.kill_reason or reason
        self._kill_tree()

    def close(self) -> None:
        """Stop the whole tree if it still runs; nothing more can be read afterwards."""
        self._kill_tree()

    # -- the event loop --------------------------------------------------------------------

    def _pump(self) -> bool:
        """One round of waiting, writing and reading; False when nothing more will come."""
        if self.popen is None or self.kill_reason is not None or self._closed:
            return False
        now = time.monotonic()
        if now >= self.deadline:
            self.kill("timeout")
            return False
        if self._exited_at is None and self.popen.poll() is not None:
            self._exited_at = now
        readers = [k for k in self._selector.get_map().values() if k.events & selectors.EVENT_READ]
        if self._exited_at is not None and (not readers or now - self._exited_at > EXIT_GRACE_SECONDS):
            return False  # exited, and the pipes are drained or held by a stray descendant
        wait = min(SCAN_SECONDS, self.deadline - now)
        if readers:
            for key, _ in self._selector.select(timeout=wait):
                if self._closed:
                    break  # a limit was hit on the previous stream: the rest is not read
                assert not isinstance(key.fileobj, int)  # what was registered: the child's pipes
                self._service(key.fileobj)
        else:
            time.sleep(wait)  # the child closed its pipes but still runs
        if not self._closed:
            self._watch()
        return not self._closed

    def _service(self, stream: HasFileno) -> None:
        """Write to stdin or read from stdout/stderr, whichever is ready."""
        assert self.popen is not None
        if stream is self.popen.stdin:
            self._write_stdin()
            return
        fd = stream.fileno()
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self._selector.unregister(stream)
            return
        if stream is self.popen.stdout:
            self._stdout += chunk
        else:
            self._stderr += chunk
            self._check_started()
        excess = len(self._stdout) + len(self._stderr) - self.limits.output_bytes
        if excess > 0:
            buffer = self._stdout if stream is self.popen.stdout else self._stderr
            del buffer[len(buffer) - excess :]
            self.kill("output_limit")

    def _write_stdin(self) -> None:
        assert self.popen is not None and self.popen.stdin is not None
        stdin = self.popen.stdin
        try:
            written = os.write(stdin.fileno(), self._to_send[:_CHUNK])
            del self._to_send[:written]
        except BlockingIOError:
            return
        except (BrokenPipeError, ConnectionResetError):
            self._to_send.clear()  # the child stopped reading: its loss
            self._close_after_send = True
        if not self._to_send:
            self._selector.unregister(stdin)
            if self._close_after_send:
                stdin.close()

    def _check_started(self) -> None:
        """Recognise and strip the launcher's marker at the very start of stderr."""
        if self.started is not None or len(self._stderr) < len(command.STARTED):
            return
        self.started = self._stderr.startswith(command.STARTED)
        if self.started:
            del self._stderr[: len(command.STARTED)]

    def _watch(self) -> None:
        """Count the tree now and then; more processes than allowed kills it (the only count where
        RLIMIT_NPROC cannot be set: `command.process_cap`)."""
        now = time.monotonic()
        if self.popen is None or now - self._last_scan < SCAN_SECONDS:
            return
        self._last_scan = now
        found = tree.descendants(self.popen.pid)
        self._seen.update(found)
        # Under bubblewrap the tree starts with bwrap and its init; without, with the candidate.
        count = len(found) - 1 if self.sandboxed else len(found) + 1
        if count > self.limits.processes:
            self.kill("processes")

    # -- the end ---------------------------------------------------------------------------

    def _kill_tree(self) -> None:
        """SIGKILL everything the run started and reap it; safe to call more than once."""
        popen = self.popen
        if popen is None or self._closed:
            return
        self._closed = True
        if self.sandboxed and popen.poll() is None:
            # Killing bwrap's init (pid 1 of the namespace) makes the kernel kill every process
            # in the namespace, setsid() daemons included; the outer bwrap then reaps it and exits.
            tree.kill(tree.descendants(popen.pid)[:1])
            try:
                popen.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        if popen.poll() is None:
            # Only while our child is unreaped: until then no other process can own its pid
            # as a process group id.
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        tree.kill(tree.descendants(popen.pid) + sorted(self._seen))
        popen.kill()
        popen.wait()
        self._sweep()
        if self._lease is not None:  # whatever still runs under its uid, however it left the tree
            self._lease.release()
        for stream in (popen.stdin, popen.stdout, popen.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        self._selector.close()

    def _sweep(self) -> None:
        """Kill stragglers that left the tree (double fork, setsid) by the token in their
        environment; repeated because a fork bomb may still be forking while it is killed."""
        token = self._token.encode()
        for _ in range(100):
            stray = tree.holding(token)
            if not stray:
                return
            tree.kill(stray)
            time.sleep(0.01)

    def _result(self) -> RunResult:
        seconds = time.monotonic() - self.started_at
        stdout = self._stdout.decode(errors="replace")
        stderr = self._stderr.decode(errors="replace")
        if self.popen is None or not self.started:
            reason = self.error or "the sandbox failed before the candidate started"
            return RunResult("infra_error", None, stdout, f"{stderr}\n[sandbox] {reason}".strip(),
                             seconds, self.sandboxed)
        code = self.popen.returncode
        if self.sandboxed and code > 128:
            code = 128 - code  # bwrap reports death by signal N as exit 128 + N
        status = _status(code, self.kill_reason, stderr)
        if self.kill_reason is not None:
            note = f"[sandbox] killed: {_KILL_REASONS[self.kill_reason](self.limits)}"
            stderr = f"{stderr}\n{note}" if stderr else note
        return RunResult(status, code, stdout, stderr, seconds, self.sandboxed)


def _give_to(directory: str, uid: int, gid: int) -> None:
    """Make the candidate's working directory (and what is in it) its own."""
    for root, dirs, files in os.walk(directory):
        os.chown(root, uid, gid)
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)


_KILL_REASONS = {
    "timeout": lambda limits: f"wall clock over {limits.wall_seconds} s",
    "output_limit": lambda limits: f"output over {limits.output_bytes} bytes",
    "processes": lambda limits: f"more than {limits.processes} processes",
}


def _status(code: int, kill_reason: KillReason | None, stderr: str) -> Status:
    """The RunResult status for a candidate that started."""
    if kill_reason == "timeout":
        return "timeout"
    if kill_reason == "output_limit":
        return "output_limit"
    if kill_reason == "processes":
        return "error"
    if code == -signal.SIGXCPU:
        return "timeout"  # RLIMIT_CPU's soft limit (a candidate that catches it meets SIGKILL)
    if code != 0 and stderr.rstrip().rsplit("\n", 1)[-1].startswith("MemoryError"):
        return "memory"
    return "ok" if code == 0 else "error"
