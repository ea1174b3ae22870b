"""The kernel's cap on a candidate's processes (RLIMIT_NPROC), which holds where the watchdog is starved: one
process past `Limits.processes`, which the watchdog, when it comes, kills.

A fork bomb beside busy cores once outgrew the machine's memory between two of the watchdog's scans: as root,
RLIMIT_NPROC does nothing, and the watchdog was the only limit. The tests of the cap switch the watchdog off, so
that only the kernel can stop the tree; the others check the uid it rests on, and what happens where it cannot be had.
"""

import fcntl
import logging
import os
import subprocess
import tempfile

import pytest

from rlvr.errors import UserError
from rlvr.sandbox import Limits, command, run_python, uids
from rlvr.sandbox.process import SandboxProcess

from .helpers import needs_bwrap

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own per candidate needs root")

LIMITS = Limits(processes=4, wall_seconds=10)
FORKS = ("import os, time\nmade = 0\nfor _ in range(40):\n    try:\n        pid = os.fork()\n"
         "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
         "    made += 1\nprint(made)\n")
"""Forks up to 40 sleeping children and prints how many it made."""


@pytest.fixture
def no_watchdog(monkeypatch):
    """The watchdog never counts, as if starved by busy cores."""
    monkeypatch.setattr(SandboxProcess, "_watch", lambda self: None)


@as_root
@needs_bwrap
def test_under_bubblewrap_as_root_the_candidate_has_a_uid_of_its_own_and_no_capabilities():
    source = ("import os\nstatus = dict(line.split(':', 1) for line in open('/proc/self/status'))\n"
              "open('out.txt', 'w').write(open('data/in.txt').read())\nopen('/tmp/scratch', 'w').write('x')\n"
              "print(os.getuid(), os.getgid(), os.getgroups(), status['CapEff'].strip(), open('out.txt').read())\n")
    result = run_python(source, files={"data/in.txt": "hello"})
    uid, gid, groups, caps, text = result.stdout.split()
    assert result.status == "ok", result.stderr
    assert uids.FIRST_UID <= int(uid) < uids.FIRST_UID + uids.POOL_SIZE and gid == uid
    assert (groups, int(caps, 16), text) == ("[]", 0, "hello")


@as_root
@needs_bwrap
def test_under_bubblewrap_as_root_the_kernel_holds_the_tree_to_the_limit(no_watchdog):
    result = run_python(FORKS, limits=LIMITS)
    assert (result.status, result.stdout) == ("ok", f"{LIMITS.processes}\n"), result.stderr


@as_root
@pytest.mark.filterwarnings("ignore:rlvr.sandbox")  # (the warning of unisolated runs: test_runner.py checks it)
def test_unisolated_as_root_the_kernel_holds_the_tree_to_the_limit(no_watchdog, no_bwrap):
    if uids.lease() is None:
        pytest.skip("rlvr's uid pool is not mapped here: candidates share 'nobody', and the watchdog counts")
    result = run_python(FORKS, limits=LIMITS)
    assert (result.status, result.stdout) == ("ok", f"{LIMITS.processes}\n"), result.stderr


@as_root
@needs_bwrap
def test_where_bubblewrap_cannot_give_a_uid_the_candidate_runs_as_root_and_the_watchdog_counts(monkeypatch):
    monkeypatch.setattr(command, "drop_problem", lambda bwrap, python: "no --perms in this bubblewrap")
    result = run_python(FORKS, limits=LIMITS)
    assert result.status == "error" and f"more than {LIMITS.processes} processes" in result.stderr


@as_root
@needs_bwrap
def test_a_failed_trial_of_the_uid_is_said_once(caplog):
    bwrap = command.find_bwrap()
    assert command.drop_problem(bwrap, command.interpreter()) is None  # this machine's bubblewrap can
    with caplog.at_level(logging.WARNING, logger="rlvr.sandbox.command"):
        problem = command.drop_problem(bwrap, "/nonexistent/python3")
        assert command.drop_problem(bwrap, "/nonexistent/python3") == problem
    said = [record.getMessage() for record in caplog.records if "watchdog alone" in record.getMessage()]
    assert problem and len(said) == 1 and problem in said[0]


@as_root
@needs_bwrap
def test_a_users_bubblewrap_counts_the_namespace_alone():
    """Run as an ordinary user (here 'nobody'), bubblewrap makes a user namespace of its own: the cap holds the
    candidate's tree to the limit although the same user has more processes than that outside."""
    python = command.public_interpreter()
    if python is None or not python.startswith("/usr/"):
        pytest.skip("no python under /usr for an unprivileged bubblewrap")
    bwrap = command.find_bwrap()
    assert bwrap is not None
    host_dir = tempfile.mkdtemp()
    os.chmod(host_dir, 0o755)
    nproc = command.process_cap(LIMITS, own_uid=False, user_namespace=True)
    argv = [*command.bwrap_argv(bwrap, python, host_dir, LIMITS),
            *command.launcher_args(python, LIMITS, command.INPUT_DIR, ["-c", FORKS], nproc=nproc)]
    nobody = {"user": command.NOBODY, "group": command.NOBODY, "extra_groups": []}
    outside = [subprocess.Popen(["sleep", "30"], **nobody) for _ in range(2 * LIMITS.processes)]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, env={"PATH": command.PATH},
                              cwd=host_dir, **nobody)
    finally:
        for process in outside:
            process.kill()
            process.wait()
        os.rmdir(host_dir)
    if command.STARTED not in done.stderr:
        pytest.skip(f"bubblewrap cannot make a user namespace for an ordinary user here: {done.stderr[-200:]!r}")
    assert done.stdout == f"{LIMITS.processes}\n".encode(), done.stderr


@as_root
def test_a_run_refused_before_it_starts_gives_its_uid_back(monkeypatch, no_sandbox_no_opt_in):
    held = []
    monkeypatch.setattr(uids, "lease", lambda real=uids.lease: held.append(real()) or held[-1])
    with pytest.raises(UserError, match="needs a sandbox"):
        run_python("print(1)")
    if held[0] is None:
        pytest.skip("rlvr's uid pool is not mapped here")
    with open(os.path.join(uids.LOCK_DIR, str(held[0].uid))) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (BlockingIOError while the refused run still held it)
