"""The command line that starts a sandboxed Python: interpreter, bubblewrap flags, launcher.

Every run goes through a small trusted launcher (`LAUNCHER`): it copies the input files into the
working directory, under bubblewrap as root gives them, ``/tmp`` and itself to the candidate's leased
uid, sets the rlimits on itself, writes `STARTED` to stderr, and only then execs the candidate's
interpreter. Setting rlimits there rather than in a ``preexec_fn`` keeps spawning safe from the
trainer's threads; the marker tells a sandbox that failed to start (infrastructure, reward None) from
a candidate that started and then failed (reward 0), and the candidate cannot forge its absence."""

from __future__ import annotations

import functools
import logging
import math
import os
import pwd
import shutil
import stat
import subprocess
import sys
import warnings
from typing import Literal

from rlvr.errors import UserError
from rlvr.sandbox import uids
from rlvr.sandbox.limits import Limits

STARTED = b"\x00rlvr-sandbox-started\n"
WORK_DIR = "/sandbox"
"""Inside bubblewrap: the candidate's working directory, a size-capped tmpfs."""
INPUT_DIR = "/sandbox-input"
"""Inside bubblewrap: the host's fresh temp dir with the source and files, read-only."""
PATH = "/usr/local/bin:/usr/bin:/bin"
NOBODY = 65534
"""The conventional uid/gid of 'nobody', when the user database has no such entry."""

# Read-only system paths the interpreter needs; a symlink (/bin -> usr/bin) is recreated as one.
_SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/alternatives",
                 "/etc/ld.so.cache", "/etc/localtime")
# Parts of /proc that change the host when written: root keeps write access to sysctls even
# without capabilities, so they are covered read-only.
_PROC_GUARDS = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")
_DROP_CAPS = ("--cap-add", "CAP_CHOWN", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID")
"""As root, what the launcher keeps to give the run to the candidate's uid; becoming that uid clears them."""

LAUNCHER = r"""
import os, resource, sys
cpu, mem, fsize, nofile, nproc, uid = (int(a) for a in sys.argv[1:7])
src = sys.argv[7]
if src:
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        for d in dirs:
            os.makedirs(os.path.join(rel, d), exist_ok=True)
        for name in files:
            with open(os.path.join(root, name), "rb") as i, open(os.path.join(rel, name), "wb") as o:
                o.write(i.read())
if uid >= 0:
    paths = ["/tmp", "."]
    for root, dirs, files in os.walk("."):
        paths += [os.path.join(root, name) for name in dirs + files]
    for path in paths:
        os.chown(path, uid, uid, follow_symlinks=False)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
def limit(kind, soft, hard):
    cap = resource.getrlimit(kind)[1]
    if cap != resource.RLIM_INFINITY:
        soft, hard = min(soft, cap), min(hard, cap)
    resource.setrlimit(kind, (soft, hard))
limit(resource.RLIMIT_CPU, cpu, cpu + 1)
limit(resource.RLIMIT_AS, mem, mem)
limit(resource.RLIMIT_FSIZE, fsize, fsize)
limit(resource.RLIMIT_NOFILE, nofile, nofile)
if nproc:
    limit(resource.RLIMIT_NPROC, nproc, nproc)
os.write(2, STARTED)
os.execv(sys.executable, [sys.executable, "-I", *sys.argv[8:]])
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


ISOLATION_ENV = "RLVR_SANDBOX"
UNISOLATED = "unisolated"
"""``RLVR_SANDBOX=unisolated``: the explicit opt-in to run model-written code without bubblewrap."""
INSTALL_HINT = "install bubblewrap (sudo apt-get install bubblewrap; dnf, pacman and zypper call it bubblewrap too)"


def sandbox_problem() -> str | None:
    """Why bubblewrap cannot isolate a candidate on this machine, or None when it can.

    Installed is not enough: bwrap fails where user namespaces are restricted (some container
    runtimes, Ubuntu's AppArmor policy), so a trial run with the real flags decides.
    """
    bwrap, python = find_bwrap(), interpreter()
    if python is None:
        return "no python interpreter was found for the sandbox"
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    error = _probe(bwrap, python)
    return None if error is None else f"bubblewrap is installed but cannot start a sandbox here ({error})"


def sandbox_available() -> bool:
    """True when bubblewrap is installed and a trial run with the real flags succeeds."""
    return sandbox_problem() is None


def isolation() -> Literal["bubblewrap", "unisolated"]:
    """How candidates will run: under bubblewrap, or (only with the user's explicit opt-in) without it.

    Fails closed: with no working sandbox and no opt-in, a UserError says how to get one. Code
    rewards and python graders call this when they are built, so a run is refused before it starts.
    """
    problem = sandbox_problem()
    if problem is None:
        return "bubblewrap"
    if os.environ.get(ISOLATION_ENV, "").strip().lower() == UNISOLATED:
        warn_unsandboxed()
        return "unisolated"
    raise UserError(f"running model-written code needs a sandbox, and {problem}: {INSTALL_HINT}, or set "
                    f"{ISOLATION_ENV}={UNISOLATED} to run it without isolation at your own risk")


@functools.cache
def _probe(bwrap: str, python: str) -> str | None:
    """Run ``python -c pass`` under the full bubblewrap configuration once per process: the error, or None."""
    probe_dir = os.path.dirname(python)  # any existing directory will do as the input dir
    return _try([*bwrap_argv(bwrap, python, probe_dir, Limits()), python, "-I", "-S", "-c", "pass"])


def _try(argv: list[str]) -> str | None:
    """Run a trial command: its error, or None when it exits 0."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, env={"PATH": PATH})
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if done.returncode != 0:
        return done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
    return None


def warn_unsandboxed() -> None:
    """Say loudly, once per process, that candidates run without isolation."""
    global _warned
    if _warned:
        return
    _warned = True
    who = ("as an unprivileged uid of its own (or 'nobody'), in its own session, so it cannot signal or read this "
           "process" if os.geteuid() == 0 else
           "as YOUR user, so it can signal your processes and the other candidates, and read your files (run as "
           "root to give each candidate an unprivileged uid of its own)")
    message = (
        f"rlvr.sandbox: {ISOLATION_ENV}={UNISOLATED}: model-written code runs with resource limits only, "
        f"NOT isolated from the network or the filesystem, {who}. {INSTALL_HINT[0].upper()}{INSTALL_HINT[1:]} "
        "before training on generated code."
    )
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    _logger.warning(message)


def unprivileged_user() -> tuple[int, int] | None:
    """(uid, gid) of 'nobody' when this process is root, else None (an unisolated candidate runs as itself). As
    root, a candidate runs under a uid of its own (rlvr.sandbox.uids), as 'nobody' where none can be had."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return NOBODY, NOBODY


def launcher_args(python: str, limits: Limits, copy_from: str, script: list[str], *, nproc: int = 0,
                  uid: int = -1) -> list[str]:
    """``python -I -S -c LAUNCHER <limits> <nproc> <uid> <copy_from> <script...>``: RLIMIT_NPROC set to `nproc`
    where it is positive, and the run given to `uid` where it is one (under bubblewrap as root)."""
    mb = 1024 * 1024
    return [python, "-I", "-S", "-c", LAUNCHER, str(math.ceil(limits.cpu_seconds)),
            str(limits.memory_mb * mb), str(limits.file_size_mb * mb), str(limits.open_files), str(nproc),
            str(uid), copy_from, *script]


def bwrap_argv(bwrap: str, python: str, host_dir: str, limits: Limits, *, drop: bool = False) -> list[str]:
    """bubblewrap's flags, ending in ``--``; the launcher's arguments follow. `drop`: the launcher (as root)
    keeps the capabilities to give the run to a leased uid, whose first exec leaves it none."""
    scratch = str(4 * limits.file_size_mb * 1024 * 1024)  # tmpfs is RAM: cap it
    argv = [bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            *(_DROP_CAPS if drop else ()), "--clearenv", "--setenv", "PATH", PATH, "--setenv", "HOME", WORK_DIR,
            "--setenv", "LANG", "C.UTF-8"]
    for path in _SYSTEM_PATHS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            argv += ["--ro-bind", path, path]
    prefix = os.path.realpath(sys.base_prefix)
    if not python.startswith("/usr/"):
        if drop:  # the folders above it (/root, say) made ones the candidate's uid may pass through
            folders = prefix.strip("/").split("/")[:-1]
            for depth in range(1, len(folders) + 1):
                argv += ["--perms", "0755", "--dir", "/" + "/".join(folders[:depth])]
        argv += ["--ro-bind", prefix, prefix]
    argv += ["--proc", "/proc"]
    for path in _PROC_GUARDS:
        argv += ["--ro-bind-try", path, path]
    argv += ["--dev", "/dev", "--size", scratch, "--tmpfs", "/tmp", "--size", scratch,
             "--tmpfs", WORK_DIR, "--ro-bind", host_dir, INPUT_DIR,
             # bwrap's root and /dev are tmpfs in RAM; read-only, they cannot be filled.
             "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORK_DIR, "--"]
    return argv


def sandbox_command(host_dir: str, limits: Limits, script: list[str],
                    uid: int | None = None) -> tuple[list[str], bool] | None:
    """(argv, under bubblewrap?) to run `script` from `host_dir`, as root under `uid` (leased: no other
    process has it) where one is given; None without an interpreter (one that 'nobody' may run, when
    dropping to it); a UserError without a sandbox unless the user opted in (`isolation`).

    RLIMIT_NPROC holds the tree to one process past `Limits.processes` wherever the kernel counts the
    candidate's processes alone (`process_cap`); elsewhere the watchdog alone counts."""
    python = interpreter()
    if python is None:
        return None
    if isolation() == "bubblewrap":
        bwrap = find_bwrap()
        assert bwrap is not None
        to = uid if uid is not None and os.geteuid() == 0 and drop_problem(bwrap, python) is None else -1
        # A user's bubblewrap (not setuid) makes a user namespace, where the kernel counts the user's processes apart.
        namespace = os.geteuid() != 0 and not os.stat(bwrap).st_mode & stat.S_ISUID
        nproc = process_cap(limits, own_uid=to >= 0, user_namespace=namespace)
        return [*bwrap_argv(bwrap, python, host_dir, limits, drop=to >= 0),
                *launcher_args(python, limits, INPUT_DIR, script, nproc=nproc, uid=to)], True
    if unprivileged_user() is not None:
        python = public_interpreter()
        if python is None:
            return None
    nproc = process_cap(limits, own_uid=uid is not None, user_namespace=False)
    return launcher_args(python, limits, "", script, nproc=nproc), False


def process_cap(limits: Limits, *, own_uid: bool, user_namespace: bool) -> int:
    """RLIMIT_NPROC for a candidate, or 0 for none: room for one process past `Limits.processes`, so that the
    watchdog still sees the limit broken, kills the tree at once and says why, and no room for a second one,
    however late the watchdog comes. The kernel counts the tasks (threads too) of the caller's uid in its user
    namespace, and none of root's: a uid that no other process has (a lease) holds exactly the candidate's
    tree; a user namespace of its own holds bubblewrap's init beside it. A shared 'nobody', a setuid
    bubblewrap or an unisolated user would count other processes too: there the watchdog alone counts."""
    if own_uid:
        return limits.processes + 1
    return limits.processes + 2 if user_namespace else 0


@functools.cache
def drop_problem(bwrap: str, python: str) -> str | None:
    """As root: why bubblewrap cannot give a candidate a leased uid here (tried once per process, and said
    once), or None when it can."""
    lease = uids.lease()
    if lease is None:
        return "no uid of rlvr's pool can be leased"
    try:
        limits = Limits()
        problem = _try([*bwrap_argv(bwrap, python, os.path.dirname(python), limits, drop=True),
                        *launcher_args(python, limits, "", ["-S", "-c", "pass"], uid=lease.uid)])
    finally:
        lease.release()
    if problem is not None:
        _logger.warning("rlvr.sandbox: bubblewrap cannot run a candidate under a uid of its own here (%s): it "
                        "runs as root without capabilities, and a fork bomb is held by the watchdog alone",
                        problem)
    return problem


def public_interpreter() -> str | None:
    """A python that any user may run (for 'nobody'): this one unless it lives in a private folder
    (pyenv under /root, say), else the system's."""
    for path in (interpreter(), "/usr/bin/python3", "/usr/local/bin/python3"):
        if path is not None and _open_to_all(os.path.realpath(path)):
            return path
    return None


def _open_to_all(path: str) -> bool:
    """Whether every user may execute `path`: it and each folder above it are world-executable."""
    if not os.path.isfile(path):
        return False
    while True:
        if not os.stat(path).st_mode & 0o001:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent
