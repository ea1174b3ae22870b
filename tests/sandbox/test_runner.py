"""run_python's normal paths, its failures to start, and the fallback without bubblewrap."""

import os
import signal
import warnings

import pytest

from rlvr.errors import UserError
from rlvr.sandbox import Limits, command, run_python, sandbox_available, tree

from .helpers import FAST

# The "no bubblewrap" warning is checked by the fallback tests; elsewhere it is noise.
pytestmark = pytest.mark.filterwarnings("ignore:rlvr.sandbox")

needs_bwrap = pytest.mark.skipif(
    not sandbox_available(),
    reason="bubblewrap is not installed or cannot create namespaces here (apt-get install bubblewrap)",
)


# -- normal paths -----------------------------------------------------------------------------


def test_ok():
    result = run_python("print('hello')")
    assert (result.status, result.returncode, result.stdout, result.stderr) == ("ok", 0, "hello\n", "")
    assert result.sandboxed == sandbox_available()


def test_stdin_is_fed():
    assert run_python("print(int(input()) * 2)", stdin="21\n").stdout == "42\n"


def test_large_stdin_and_stdout():
    # More than a pipe buffer both ways: stdin is written as the child reads it.
    result = run_python("import sys\ndata = sys.stdin.read()\nprint(len(data))\nprint(data[:10])",
                        stdin="x" * 300_000)
    assert result.stdout == "300000\nxxxxxxxxxx\n"


def test_error_keeps_traceback():
    result = run_python("def f():\n    raise ValueError('boom')\nf()\n")
    assert (result.status, result.returncode) == ("error", 1)
    assert "Traceback" in result.stderr and "ValueError: boom" in result.stderr


def test_wall_clock_timeout():
    result = run_python("import time\ntime.sleep(100)", limits=Limits(wall_seconds=0.5))
    assert result.status == "timeout"
    assert result.seconds < 2


def test_cpu_timeout():
    result = run_python("while True:\n    pass", limits=Limits(cpu_seconds=1, wall_seconds=10))
    assert (result.status, result.returncode) == ("timeout", -signal.SIGXCPU)
    assert result.seconds < 5


def test_memory_error():
    assert run_python("x = bytearray(2**40)").status == "memory"


def test_output_limit():
    result = run_python("print('x' * 5000)", limits=Limits(output_bytes=1000))
    assert result.status == "output_limit"
    assert len(result.stdout) == 1000


@pytest.mark.parametrize("children_files", [True, False])
def test_the_watchdog_kills_a_tree_past_the_process_limit(monkeypatch, children_files):
    """Where the kernel cannot count the candidate's processes alone (no RLIMIT_NPROC), the watchdog does;
    also on kernels without CONFIG_PROC_CHILDREN."""
    monkeypatch.setattr(command, "process_cap", lambda *args, **kwargs: 0)
    monkeypatch.setattr(tree, "HAS_CHILDREN_FILES", children_files)
    source = ("import os, time\nfor _ in range(10):\n    if os.fork() == 0:\n        time.sleep(100)\n"
              "time.sleep(100)\n")
    result = run_python(source, limits=Limits(processes=3, wall_seconds=5))
    assert result.status == "error"
    assert "more than 3 processes" in result.stderr


def test_files_passed_in():
    result = run_python("print(open('data/in.txt').read())", files={"data/in.txt": "hello"})
    assert result.stdout == "hello\n"


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/escape.txt", "a/../../escape.txt"])
def test_file_names_stay_inside(name):
    with pytest.raises(UserError, match="leaves the working directory"):
        run_python("pass", files={name: "x"})


def test_file_cannot_replace_the_program():
    with pytest.raises(UserError, match="main.py"):
        run_python("print(1)", files={"main.py": "print(2)"})


@needs_bwrap
def test_runs_isolated():
    source = ("import os, socket\nprint(os.getcwd(), socket.gethostname(), os.getpid())\n"
              "open('out.txt', 'w').write('x')\nopen('/tmp/out.txt', 'w').write('x')\n")
    result = run_python(source)
    assert result.sandboxed
    assert result.stdout == "/sandbox sandbox 2\n"  # pid 2: bwrap's init is pid 1


# -- failures to start are infrastructure, never the candidate's ------------------------------


def test_missing_interpreter(monkeypatch):
    monkeypatch.setattr(command, "interpreter", lambda: None)
    result = run_python("print(1)")
    assert (result.status, result.returncode) == ("infra_error", None)
    assert "no python interpreter" in result.stderr


def test_sandbox_that_cannot_start(monkeypatch):
    monkeypatch.setattr(command, "sandbox_command", lambda *args: (["/nonexistent/bwrap"], True))
    assert run_python("print(1)").status == "infra_error"


def test_sandbox_that_fails_before_the_candidate(monkeypatch):
    failing = ["sh", "-c", "echo 'bwrap: No permissions to create new namespace' >&2; exit 1"]
    monkeypatch.setattr(command, "sandbox_command", lambda *args: (failing, True))
    result = run_python("print(1)")
    assert result.status == "infra_error"
    assert "No permissions" in result.stderr


# -- without bubblewrap and without the opt-in: nothing runs --------------------------------------


def test_without_a_sandbox_code_is_refused_with_the_fix(no_sandbox_no_opt_in):
    with pytest.raises(UserError) as e:
        run_python("print(1)")
    message = str(e.value)
    assert "bubblewrap (bwrap) is not installed" in message and "apt-get install bubblewrap" in message
    assert "RLVR_SANDBOX=unisolated" in message and "\n" not in message


def test_a_bubblewrap_that_cannot_start_is_no_sandbox(monkeypatch):
    monkeypatch.delenv(command.ISOLATION_ENV, raising=False)
    monkeypatch.setattr(command, "find_bwrap", lambda: "/bin/false")
    with pytest.raises(UserError, match="bubblewrap is installed but cannot start a sandbox here"):
        run_python("print(1)")


def test_code_rewards_and_graders_are_refused_when_built(no_sandbox_no_opt_in):
    from rlvr.rewards import load_reward_function
    from rlvr.rewards.graders import load_grader

    for build in (lambda: load_reward_function("code_tests"), lambda: load_reward_function("code_tests_all"),
                  lambda: load_grader({"type": "code"}),
                  lambda: load_grader({"type": "python", "source": "def grade(sample, item):\n    return 1.0\n"}),
                  lambda: load_grader({"type": "multi", "calculate_output": "a", "graders": {
                      "a": {"type": "python", "source": "def grade(sample, item):\n    return 1.0\n"}}})):
        with pytest.raises(UserError, match="needs a sandbox"):
            build()
    assert load_reward_function("math_accuracy")  # rewards that run no code are unaffected


def test_the_python_tool_environment_is_refused_when_loaded(no_sandbox_no_opt_in):
    from rlvr.envs import load_environment

    with pytest.raises(UserError, match="needs a sandbox"):
        load_environment("python_tool", max_calls=2)
    assert load_environment("guess_number")  # environments that run no code are unaffected


def test_rlvr_grade_without_a_sandbox_is_one_line(tmp_path):
    import os
    import subprocess
    import sys

    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"completion": "```python\\nprint(1)\\n```", "tests": [{"input": "", "output": "1"}]}\n')
    env = {k: v for k, v in os.environ.items() if k != command.ISOLATION_ENV}
    env["PATH"] = os.path.dirname(sys.executable)  # no bwrap on the PATH
    out = subprocess.run([sys.executable, "-m", "rlvr", "grade", "--grader", "code", "--input", str(rows),
                          "--output", str(tmp_path / "scored.jsonl")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "needs a sandbox" in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


# -- without bubblewrap, opted in: rlimits only, a loud warning, and no power over the trainer ----------


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to 'nobody' needs root; as a user the candidate is the user")
def test_unisolated_as_root_the_candidate_cannot_signal_or_read_the_trainer(no_bwrap, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    secret.chmod(0o600)
    attack = ("import os, signal\n"
              "try:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept PermissionError:\n    print('no kill')\n"
              f"try:\n    print(open({str(secret)!r}).read())\nexcept PermissionError:\n    print('no read')\n"
              "try:\n    print(open(f'/proc/{os.getppid()}/environ').read())\nexcept PermissionError:\n"
              "    print('no environ')\n"
              "print(os.getuid() != 0, os.getsid(0) != os.getsid(os.getppid()))\n"
              "open('scratch.txt', 'w').write('its working directory is its own')\n")
    with pytest.warns(RuntimeWarning, match="'nobody'"):
        result = run_python(attack, limits=FAST)
    assert (result.status, result.sandboxed) == ("ok", False), result.stderr
    assert result.stdout.split("\n")[:4] == ["no kill", "no read", "no environ", "True True"]


as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own per candidate needs root")


@as_root
def test_unisolated_candidates_cannot_kill_each_other(no_bwrap):
    """One candidate's `kill -9 -1` reaches only its own processes: each runs under a uid of its own."""
    from concurrent.futures import ThreadPoolExecutor

    victim = "import os, time\ntime.sleep(2)\nprint('alive', os.getuid())\n"
    killer = "import os, time\ntime.sleep(0.5)\nprint(os.getuid())\nos.kill(-1, 9)\n"
    limits = Limits(wall_seconds=6)
    with ThreadPoolExecutor(2) as pool:
        survivor = pool.submit(run_python, victim, limits=limits)
        killed = pool.submit(run_python, killer, limits=limits).result()
        result = survivor.result()
    assert result.status == "ok" and result.stdout.startswith("alive"), result
    assert killed.status == "ok" and result.stdout.split()[1] != killed.stdout.strip()  # (-1 spares the sender)


@as_root
def test_unisolated_a_daemon_that_sheds_its_environment_is_killed(no_bwrap, tagged):
    """A daemon that left the tree and exec'd with an empty environment (no token to sweep by) dies with
    its candidate's uid."""
    body = ("import os, sys\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', sys.argv[-1]],"
            " {})\n    os._exit(0)\nprint('parent done')\n")
    assert run_python(tagged.program(body), limits=FAST).stdout == "parent done\n"
    left = tagged.survivors()
    for pid in left:  # (should this test fail, it leaves nothing behind either)
        os.kill(pid, signal.SIGKILL)
    assert left == []


def test_unisolated_temporary_files_stay_in_the_candidates_folder(no_bwrap):
    """tempfile (TMPDIR, TEMP, TMP) points into the candidate's own working directory, removed after the run,
    not into the host's /tmp."""
    result = run_python("import os, tempfile\nfd, path = tempfile.mkstemp()\nprint(os.getcwd(), path)\n")
    folder, path = result.stdout.split()
    try:
        assert path.startswith(folder + os.sep) and not os.path.exists(path) and not os.path.exists(folder)
    finally:
        if os.path.dirname(path) == "/tmp" and os.path.exists(path):
            os.unlink(path)


# -- without bubblewrap, opted in: rlimits only, and a loud warning -------------------------------------


def test_fallback_warns(no_bwrap):
    with pytest.warns(RuntimeWarning, match="NOT isolated"):
        result = run_python("print(1)")
    assert (result.status, result.stdout, result.sandboxed) == ("ok", "1\n", False)


def test_fallback_warns_once(no_bwrap):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_python("pass")
        run_python("pass")
    assert len([w for w in caught if "NOT isolated" in str(w.message)]) == 1


def test_fallback_memory_limit(no_bwrap):
    assert run_python("x = bytearray(2**30)", limits=FAST).status == "memory"


def test_fallback_cpu_limit(no_bwrap):
    assert run_python("while True:\n    pass", limits=FAST).status == "timeout"


def test_fallback_wall_clock(no_bwrap):
    result = run_python("import time\ntime.sleep(100)", limits=FAST)
    assert result.status == "timeout" and result.seconds < FAST.wall_seconds + 1


def test_fallback_file_size_limit(no_bwrap):
    result = run_python("open('big.bin', 'wb').write(b'0' * 2**25)", limits=Limits(file_size_mb=1))
    assert result.status == "error" and "File too large" in result.stderr


def test_fallback_open_files_limit(no_bwrap):
    result = run_python("files = [open('f.txt', 'w') for _ in range(100)]", limits=Limits(open_files=16))
    assert result.status == "error" and "Too many open files" in result.stderr


def test_fallback_environment_is_minimal(no_bwrap, monkeypatch):
    monkeypatch.setenv("SECRET", "hunter2")
    assert "hunter2" not in run_python("import os\nprint(dict(os.environ))").stdout


def test_fallback_kills_setsid_daemon(no_bwrap, tagged):
    body = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        time.sleep(1000)\n    os._exit(0)\nprint('parent done')\n")
    assert run_python(tagged.program(body), limits=FAST).stdout == "parent done\n"
    assert tagged.survivors() == []
