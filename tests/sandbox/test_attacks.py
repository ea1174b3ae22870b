"""Adversarial tests: one attack per test, each must score 0 (None only for infrastructure),
leave no process behind, and leave the host untouched.

Processes are found from the host by a unique token each attack carries on its command line
(`Tagged.program`). All of these need bubblewrap: without it the candidate is not isolated
(that mode is tested in test_runner.py), and some attacks would hit the test process itself.
"""

import os
import socket
import time
from pathlib import Path

import pytest

from rlvr.rewards.code import code_tests
from rlvr.sandbox import Limits, run_python, sandbox_available

from .helpers import FAST, reward

# Seconds past its wall limit by which an attack that would run forever must have been ended (its processes
# killed and reaped): generous, since 2 busy cores slow the reaping of a fork bomb's processes (7.5 s seen).
ENDED_WITHIN = 10

pytestmark = pytest.mark.skipif(
    not sandbox_available(),
    reason="bubblewrap is not installed or cannot create namespaces here (apt-get install bubblewrap)",
)

ADD_TEST = """
def check(candidate):
    assert candidate(1, 2) == 3
    assert candidate(-5, 5) == 0
    assert candidate(10, 20) == 30
"""


def function_reward(source: str) -> float | None:
    """The HumanEval-style reward of `source` against ADD_TEST (entry point ``add``)."""
    completion = f"```python\n{source}\n```"
    return code_tests([completion], test=[ADD_TEST], entry_point=["add"], limits=FAST)[0]


# -- resources --------------------------------------------------------------------------------


def test_fork_bomb(tagged):
    body = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    start = time.monotonic()
    assert reward(tagged.program(body), "42") == 0.0
    assert time.monotonic() - start < FAST.wall_seconds + ENDED_WITHIN
    assert tagged.survivors() == []


def test_memory_bomb(tagged):
    body = "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 2**20))\n"
    result = run_python(tagged.program(body), limits=FAST)
    assert result.status == "memory"
    assert reward(tagged.program(body), "42") == 0.0
    assert tagged.survivors() == []


def test_infinite_loop(tagged):
    start = time.monotonic()
    assert reward(tagged.program("while True:\n    pass\n"), "42") == 0.0
    assert time.monotonic() - start < FAST.wall_seconds + ENDED_WITHIN
    assert tagged.survivors() == []


def test_sleep_forever(tagged):
    start = time.monotonic()
    assert reward(tagged.program("import time\ntime.sleep(1000)\n"), "42") == 0.0
    assert time.monotonic() - start < FAST.wall_seconds + ENDED_WITHIN
    assert tagged.survivors() == []


def test_stdout_flood(tagged):
    body = "while True:\n    print('x' * 10000)\n"
    result = run_python(tagged.program(body), limits=FAST)
    assert result.status == "output_limit"
    assert len(result.stdout) + len(result.stderr.encode()) <= FAST.output_bytes + 200  # + the note
    assert reward(tagged.program(body), "42") == 0.0
    assert tagged.survivors() == []


def test_huge_file(tagged):
    # The working directory and /tmp are size-capped tmpfs inside the sandbox: the host's disk
    # is never written. RLIMIT_FSIZE stops the file at Limits.file_size_mb.
    body = ("import os\nwith open('huge.bin', 'wb') as f:\n    try:\n        for _ in range(100):\n"
            "            f.write(b'0' * 2**20)\n            f.flush()\n    finally:\n"
            "        print(os.path.getsize('huge.bin'))\n")
    result = run_python(tagged.program(body), limits=FAST)
    assert result.status == "error" and "File too large" in result.stderr
    assert int(result.stdout) <= FAST.file_size_mb * 2**20
    assert reward(tagged.program(body), str(100 * 2**20)) == 0.0
    assert tagged.survivors() == []


def test_input_without_input(tagged):
    start = time.monotonic()
    assert reward(tagged.program("print(input())\n"), "42") == 0.0
    assert time.monotonic() - start < 2  # EOF at once: stdin is closed after the test's input
    assert tagged.survivors() == []


def test_read_forever(tagged):
    # A pipe the candidate holds both ends of never reaches EOF: only the wall clock ends it.
    body = "import os\nr, w = os.pipe()\nos.read(r, 1)\n"
    start = time.monotonic()
    assert reward(tagged.program(body), "42") == 0.0
    assert time.monotonic() - start < FAST.wall_seconds + ENDED_WITHIN
    assert tagged.survivors() == []


# -- escaping the process tree ----------------------------------------------------------------


def test_setsid_daemon(tagged):
    body = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        time.sleep(1000)\n    os._exit(0)\nprint('parent done')\n")
    assert reward(tagged.program(body), "42") == 0.0
    assert tagged.survivors() == []


def test_kill_parent(tagged):
    body = "import os, time\nos.kill(os.getppid(), 9)\ntime.sleep(1000)\n"
    assert reward(tagged.program(body), "42") == 0.0
    assert tagged.survivors() == []  # and this test process is still here to check


def test_kill_process_groups(tagged):
    body = ("import os, time\nfor group in (os.getpgid(os.getppid()), os.getpgid(0)):\n    try:\n"
            "        os.killpg(group, 9)\n    except OSError:\n        pass\ntime.sleep(1000)\n")
    assert reward(tagged.program(body), "42") == 0.0
    assert tagged.survivors() == []


def test_forged_infrastructure_failure(tagged):
    # Pretending bwrap failed must not turn a 0 into None (not scored).
    body = "import sys\nsys.stderr.write('bwrap: Can\\'t mount proc\\n')\nsys.exit(1)\n"
    assert reward(tagged.program(body), "42") == 0.0
    assert tagged.survivors() == []


# -- reading or changing the host -------------------------------------------------------------


def test_environment_secret(tagged, monkeypatch):
    monkeypatch.setenv("SECRET", "hunter2-environment")
    body = "import os\nprint(os.environ.get('SECRET', ''))\n"
    assert reward(tagged.program(body), "hunter2-environment") == 0.0
    assert tagged.survivors() == []


def test_environment_secret_of_other_processes(tagged, monkeypatch):
    # bwrap's own init (pid 1 inside) keeps the environment it was started with.
    monkeypatch.setenv("SECRET", "hunter2-proc")
    body = ("import os\nfor pid in os.listdir('/proc'):\n    try:\n"
            "        env = open(f'/proc/{pid}/environ', 'rb').read()\n    except OSError:\n"
            "        continue\n    if b'SECRET=' in env:\n"
            "        print(env.split(b'SECRET=')[1].split(b'\\0')[0].decode())\n")
    assert reward(tagged.program(body), "hunter2-proc") == 0.0
    assert tagged.survivors() == []


def test_read_file_in_tmp_path(tagged, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-file")
    body = (f"for path in ({str(secret)!r}, '/proc/1/root' + {str(secret)!r}):\n    try:\n"
            "        print(open(path).read())\n    except OSError:\n        pass\n")
    assert reward(tagged.program(body), "hunter2-file") == 0.0
    assert tagged.survivors() == []


def test_read_project_files(tagged):
    this_file = Path(__file__).resolve()
    body = f"print(open({str(this_file)!r}).read())\n"
    assert reward(tagged.program(body), this_file.read_text()) == 0.0
    assert tagged.survivors() == []


def test_read_home_directory(tagged):
    home = Path.home()
    listing = "\n".join(sorted(os.listdir(home)))
    body = f"import os\nprint('\\n'.join(sorted(os.listdir({str(home)!r}))))\n"
    assert reward(tagged.program(body), listing) == 0.0
    assert tagged.survivors() == []


def test_write_outside(tagged, tmp_path):
    target = tmp_path / "pwned"
    body = f"open({str(target)!r}, 'w').write('x')\nprint('written')\n"
    assert reward(tagged.program(body), "written") == 0.0
    assert not target.exists()
    assert tagged.survivors() == []


def test_write_sysctl(tagged):
    # Root keeps write access to /proc/sys without capabilities unless it is mounted read-only.
    # The value written back is the one read, so even a broken sandbox would change nothing.
    body = ("path = '/proc/sys/kernel/pid_max'\nvalue = open(path).read()\n"
            "with open(path, 'w') as f:\n    f.write(value)\nprint('written')\n")
    assert reward(tagged.program(body), "written") == 0.0
    assert tagged.survivors() == []


def test_capabilities(tagged):
    body = ("line = [l for l in open('/proc/self/status') if l.startswith('CapEff')][0]\n"
            "print('privileged' if int(line.split()[1], 16) else 'none')\n")
    assert reward(tagged.program(body), "privileged") == 0.0
    assert run_python(tagged.program(body), limits=FAST).stdout == "none\n"
    assert tagged.survivors() == []


def test_connect_to_loopback(tagged):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        body = (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
                "print('connected')\n")
        assert reward(tagged.program(body), "connected") == 0.0
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected
    assert tagged.survivors() == []


# -- fooling the comparison -------------------------------------------------------------------


def test_forged_eq():
    source = ("class Anything:\n    def __eq__(self, other):\n        return True\n"
              "    __hash__ = object.__hash__\n\ndef add(a, b):\n    return Anything()\n")
    assert function_reward(source) == 0.0


def test_forged_int_subclass():
    source = ("class Int(int):\n    def __eq__(self, other):\n        return True\n\n"
              "def add(a, b):\n    return Int(0)\n")
    assert function_reward(source) == 0.0


def test_exit_before_the_tests():
    assert function_reward("import sys\nsys.exit(0)\n\ndef add(a, b):\n    return a + b\n") == 0.0


def test_fake_success_output_then_exit():
    fake = ['{"done": "completed", "detail": ""}', '{"assert": true}', '{"ok": 3}', "All tests passed"]
    prints = "".join(f"print({line!r})\n" for line in fake)
    assert function_reward(f"import os\n{prints}os._exit(0)\n") == 0.0


def test_fake_output_inside_the_function():
    # The function prints what a reply looks like, then returns the wrong value.
    assert function_reward("def add(a, b):\n    print('{\"ok\": %d}' % (a + b))\n    return -1\n") == 0.0


def test_deeply_nested_result():
    # Deeper than json can decode: the trainer's process must shrug, the candidate gets 0.
    source = "def add(a, b):\n    x = 0\n    for _ in range(100000):\n        x = [x]\n    return x\n"
    assert function_reward(source) == 0.0


def test_partial_output():
    case = {"input": "", "output": "1\n2\n3\n"}
    source = "print(1)"
    assert code_tests([f"```python\n{source}\n```"], tests=[[case]], limits=FAST) == [0.0]


def test_limits_apply_to_function_tests(tagged):
    # The function turns the serving process into a spin loop: RLIMIT_CPU applies there too.
    spin = f"[sys.executable, '-c', 'while True: pass', {tagged.token!r}]"
    source = f"import os, sys\ndef add(a, b):\n    os.execv(sys.executable, {spin})\n"
    limits = Limits(cpu_seconds=1, wall_seconds=3)
    completion = f"```python\n{source}\n```"
    assert code_tests([completion], test=[ADD_TEST], entry_point=["add"], limits=limits) == [0.0]
    assert tagged.survivors() == []
