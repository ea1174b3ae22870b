"""Run untrusted Python (model-written code, graders) in a fresh, limited, killable process.

Every run is a new process tree. Under bubblewrap (`sandbox_available()`): new network, PID,
IPC and UTS namespaces, ``--die-with-parent``, ``--cap-drop ALL``, ``--clearenv``, the system
read-only, a private size-capped tmpfs for ``/tmp`` and the working directory, nothing of the
host's home or project visible. Without a working bubblewrap it fails closed: `isolation()` (called
when a code reward or python grader is built, and before every run) raises a UserError saying how
to install it, unless the user opts in with ``RLVR_SANDBOX=unisolated``; then resource limits
alone, with a loud warning, the candidate in its own session with its temporary files in its own
folder. When rlvr runs as root, in either mode, each candidate runs under a uid of its own (uids.py; it
may not signal or read the trainer or the other candidates, and the kernel counts its processes). Either
way: rlimits on CPU time, address space, file size, open files and (where the kernel counts the candidate
alone) processes, a watchdog on the number of processes, a wall clock, a cap on captured output, and the
whole tree killed at the end.

- limits.py: `Limits` (what a run may use), `RunResult` (what came back)
- runner.py: `run_python`, the one-shot call
- process.py: `SandboxProcess`, one live tree with its pipes and watchdog
- command.py: the interpreter, bubblewrap's flags, the launcher that sets the rlimits
- tree.py: process trees from /proc
- uids.py: as root, a uid leased to each candidate
- calls.py + serve_calls.py + check_calls.py + plain.py: function tests whose comparisons
  never share a process with the candidate (see calls.py)
"""

from rlvr.sandbox.command import isolation, sandbox_available, sandbox_problem
from rlvr.sandbox.limits import Limits, RunResult, Status
from rlvr.sandbox.runner import run_python

__all__ = ["Limits", "RunResult", "Status", "isolation", "run_python", "sandbox_available", "sandbox_problem"]
