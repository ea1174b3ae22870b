"""What one sandboxed run may use (`Limits`) and what came back from it (`RunResult`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "error", "timeout", "memory", "output_limit", "infra_error"]


@dataclass(frozen=True)
class Limits:
    """Resource limits for one candidate process tree."""

    cpu_seconds: float = 5.0
    """CPU time of each process (RLIMIT_CPU, rounded up to whole seconds): SIGXCPU, then SIGKILL."""
    wall_seconds: float = 10.0
    """Wall clock for the whole run; RLIMIT_CPU does not stop ``sleep()`` or a blocked read."""
    memory_mb: int = 512
    """Address space of each process (RLIMIT_AS): allocations beyond it raise MemoryError."""
    file_size_mb: int = 16
    """Largest file a process may write (RLIMIT_FSIZE): writes beyond it fail with EFBIG."""
    open_files: int = 64
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    processes: int = 16
    """Processes in the tree: a watchdog counts the tree every few milliseconds and kills it when it grows
    past this. Where the candidate has a uid or a user namespace of its own, the kernel also refuses any fork
    beyond one past it (RLIMIT_NPROC; threads count there too), however late the watchdog comes."""
    output_bytes: int = 1_000_000
    """stdout + stderr kept; one byte more and the tree is killed with status "output_limit"."""


@dataclass
class RunResult:
    """The outcome of one sandboxed run, as raw data: judging it is the caller's business."""

    status: Status
    """ok (exit 0), error (non-zero exit, a signal, or too many processes), timeout (wall clock or
    CPU limit), memory (MemoryError), output_limit, infra_error (the sandbox itself failed: the
    candidate never ran, and its result says nothing about it)."""
    returncode: int | None
    """Exit code; minus the signal number when killed by a signal; None if never started."""
    stdout: str
    stderr: str
    seconds: float
    """Wall-clock seconds from start to the last process reaped."""
    sandboxed: bool
    """True: ran under bubblewrap. False: rlimits only, not isolated from network or files."""
