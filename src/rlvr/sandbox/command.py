"""The command line that starts a sandboxed Python: interpreter, bubblewrap flags, launcher.

Every run goes through a small trusted launcher (`LAUNCHER`): it copies the input files into the
working directory, sets the rlimits on itself, writes `STARTED` to stderr, and only then execs the
candidate's interpreter. Setting rlimits there rather than in a ``preexec_fn`` keeps spawning safe
from the trainer's threads; the marker tells a sandbox that failed to start (infrastructure,
reward None) from a candidate that started and then failed (reward 0), and the candidate cannot
forge its absence.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import shutil
import subprocess
import sys
import warnings

from rlvr.sandbox.limits import Limits

STARTED = b"\x00rlvr-sandbox-started\n"
WORK_DIR = "/sandbox"
"""Inside bubblewrap: the candidate's working directory, a size-capped tmpfs."""
INPUT_DIR = "/sandbox-input"
"""Inside bubblewrap: the host's fresh temp dir with the source and files, read-only."""
PATH = "/usr/local/bin:/usr/bin:/bin"

# Read-only system paths the interpreter needs; a symlink (/bin -> usr/bin) is recreated as one.
_SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/alternatives",
                 "/etc/ld.so.cache", "/etc/localtime")
# Parts of /proc that change the host when written: root keeps write access to sysctls even
# without capabilities, so they are covered read-only.
_PROC_GUARDS = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")

LAUNCHER = r"""
import os, resource, sys
cpu, mem, fsize, nofile = (int(a) for a in sys.argv[1:5])
src = sys.argv[5]
if src:
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        for d in dirs:
            os.makedirs(os.path.join(rel, d), exist_ok=True)
        for name in files:
            with open(os.path.join(root, name), "rb") as i, open(os.path.join(rel, name), "wb") as o:
                o.write(i.read())
def limit(kind, soft, hard):
    cap = resource.getrlimit(kind)[1]
    if cap != resource.RLIM_INFINITY:
        soft, hard = min(soft, cap), min(hard, cap)
    resource.setrlimit(kind, (soft, hard))
limit(resource.RLIMIT_CPU, cpu, cpu + 1)
limit(resource.RLIMIT_AS, mem, mem)
limit(resource.RLIMIT_FSIZE, fsize, fsize)
limit(resource.RLIMIT_NOFILE, nofile, nofile)
os.write(2, STARTED)
os.execv(sys.executable, [sys.executable, "-I", *sys.argv[6:]])
""".replace("STARTED", repr(STARTED))

_logger = logging.getLogger(__name__)
_warned = False


def interpreter() -> str | None:
    """The base installation's python (not the venv's): the candidate needs only the stdlib."""
    prefix = os.path.realpath(sys.base_prefix)
    for name in (f"python{sys.version_info.major}.{sys.version_info.minor}", "python3"):
        path = os.path.join(prefix, "bin", name)
        if os.access(path, os.X_OK):
            return path
    return None


def find_bwrap() -> str | None:
    """The bubblewrap executable on PATH, or None."""
    return shutil.which("bwrap")


def sandbox_available() -> bool:
    """True when bubblewrap is installed and a trial run with the real flags succeeds.

    Installed is not enough: bwrap fails where user namespaces are restricted (some container
    runtimes, Ubuntu's AppArmor policy), and that must fall back, not crash every candidate.
    """
    bwrap, python = find_bwrap(), interpreter()
    return bwrap is not None and python is not None and _probe(bwrap, python)


@functools.cache
def _probe(bwrap: str, python: str) -> bool:
    """Run ``python -c pass`` under the full bubblewrap configuration once per process."""
    probe_dir = os.path.dirname(python)  # any existing directory will do as the input dir
    argv = bwrap_argv(bwrap, python, probe_dir, Limits())
    cut = argv.index("--")
    try:
        done = subprocess.run([*argv[: cut + 1], python, "-I", "-S", "-c", "pass"],
                              capture_output=True, timeout=30, env={"PATH": PATH})
    except (OSError, subprocess.TimeoutExpired):
        return False
    if done.returncode != 0:
        _logger.warning("bubblewrap is installed but cannot start a sandbox here: %s",
                        done.stderr.decode(errors="replace").strip())
    return done.returncode == 0


def warn_unsandboxed() -> None:
    """Say loudly, once per process, that candidates run without isolation."""
    global _warned
    if _warned:
        return
    _warned = True
    message = (
        "rlvr.sandbox: bubblewrap is not available, so untrusted code runs with resource limits "
        "ONLY: it is NOT isolated from the network, the filesystem, or this process's user. "
        "Install bubblewrap (apt-get install bubblewrap) before training on generated code."
    )
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    _logger.warning(message)


def launcher_args(python: str, limits: Limits, copy_from: str, script: list[str]) -> list[str]:
    """``python -I -S -c LAUNCHER <limits> <copy_from> <script...>``."""
    mb = 1024 * 1024
    return [python, "-I", "-S", "-c", LAUNCHER, str(math.ceil(limits.cpu_seconds)),
            str(limits.memory_mb * mb), str(limits.file_size_mb * mb), str(limits.open_files),
            copy_from, *script]


def bwrap_argv(bwrap: str, python: str, host_dir: str, limits: Limits) -> list[str]:
    """bubblewrap's flags, ending in ``--``; the launcher's arguments follow."""
    scratch = str(4 * limits.file_size_mb * 1024 * 1024)  # tmpfs is RAM: cap it
    argv = [bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--clearenv", "--setenv", "PATH", PATH, "--setenv", "HOME", WORK_DIR,
            "--setenv", "LANG", "C.UTF-8"]
    for path in _SYSTEM_PATHS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            argv += ["--ro-bind", path, path]
    prefix = os.path.realpath(sys.base_prefix)
    if not python.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    argv += ["--proc", "/proc"]
    for path in _PROC_GUARDS:
        argv += ["--ro-bind-try", path, path]
    argv += ["--dev", "/dev", "--size", scratch, "--tmpfs", "/tmp", "--size", scratch,
             "--tmpfs", WORK_DIR, "--ro-bind", host_dir, INPUT_DIR,
             # bwrap's root and /dev are tmpfs in RAM; read-only, they cannot be filled.
             "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORK_DIR, "--"]
    return argv


def sandbox_command(host_dir: str, limits: Limits, script: list[str]) -> tuple[list[str], bool] | None:
    """(argv, under bubblewrap?) to run `script` from `host_dir`; None without an interpreter."""
    python = interpreter()
    if python is None:
        return None
    bwrap = find_bwrap()
    if bwrap is not None and sandbox_available():
        return [*bwrap_argv(bwrap, python, host_dir, limits),
                *launcher_args(python, limits, INPUT_DIR, script)], True
    warn_unsandboxed()
    return launcher_args(python, limits, "", script), False
