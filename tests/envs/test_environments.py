"""Environments: the python tool's calls, outputs and limits (and every sandbox attack issued as a tool
call mid-conversation), the guess-the-number game, and loading user environments."""

import ast
import os
import socket
import time
from pathlib import Path

import pytest

from rlvr.envs import load_environment
from rlvr.envs.guess import GuessNumber
from rlvr.envs.python_tool import INSTRUCTIONS, PythonTool
from rlvr.errors import UserError

from ..sandbox.helpers import FAST, Tagged, needs_bwrap

ASK = [{"role": "user", "content": "What is 347 * 28? Put your final answer in \\boxed{}."}]


def call(code, before="Let me compute it.\n"):
    return f"{before}```python\n{code}```\nSo the output is 12."  # the model goes on past the fence


def test_a_code_block_runs_and_its_output_comes_back_as_a_tool_message():
    env = PythonTool(limits=FAST)
    messages = env.reset({"answer": "9716"}, ASK, seed=0)
    assert messages == [{"role": "system", "content": INSTRUCTIONS}, *ASK]
    text = call("print(347 * 28)\n")
    reply = env.step(text)
    assert not reply.done and reply.reward is None
    assert reply.message == {"role": "tool", "content": "```output\n9716\n\n```"}
    assert text[:reply.keep].endswith("print(347 * 28)\n```")  # what the model wrote after the call is dropped
    assert reply.info == {"tool_calls": 1.0, "tool_errors": 0.0, "tool_timeouts": 0.0}
    final = env.step("The answer is \\boxed{9716}.")
    assert final.done and final.message is None and final.reward is None  # the task's verifier scores it


def test_errors_and_timeouts_are_text_for_the_model_and_counted():
    env = PythonTool(limits=FAST)
    env.reset({}, ASK, seed=0)
    failed = env.step(call("1 / 0\n"))
    assert "ZeroDivisionError" in failed.message["content"] and failed.info["tool_errors"] == 1.0
    slow = env.step(call("while True:\n    pass\n"))
    assert "(stopped: the program ran past its time limit)" in slow.message["content"]
    assert slow.info == {"tool_calls": 1.0, "tool_errors": 1.0, "tool_timeouts": 1.0}


def test_output_is_cut_and_calls_are_limited():
    env = PythonTool(max_calls=2, output_chars=50, limits=FAST)
    env.reset({}, ASK, seed=0)
    long = env.step(call("print('x' * 5000)\n"))
    assert "x" * 50 + "\n... (4951 more characters cut)" in long.message["content"]
    assert not env.step(call("print(1)\n")).done
    third = env.step(call("print(2)\n"))  # past max_calls: the message is the final answer
    assert third.done and third.message is None


def test_a_system_prompt_gets_the_instructions_appended():
    env = PythonTool()
    out = env.reset({}, [{"role": "system", "content": "Be brief."}, *ASK], seed=0)
    assert out[0]["content"] == "Be brief.\n\n" + INSTRUCTIONS and out[1:] == ASK
    assert PythonTool(instructions=False).reset({}, ASK, seed=0) == ASK


# every attack of tests/sandbox/test_attacks.py, as a tool call in the middle of a conversation
ATTACKS = {
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "memory bomb": "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 2**20))\n",
    "infinite loop": "while True:\n    pass\n",
    "sleep forever": "import time\ntime.sleep(1000)\n",
    "stdout flood": "while True:\n    print('x' * 10000)\n",
    "huge file": "with open('huge.bin', 'wb') as f:\n    for _ in range(100):\n        f.write(b'0' * 2**20)\n",
    "read forever": "import os\nr, w = os.pipe()\nos.read(r, 1)\n",
    "setsid daemon": ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                      "        time.sleep(1000)\n    os._exit(0)\nprint('parent done')\n"),
    "kill parent": "import os, time\nos.kill(os.getppid(), 9)\ntime.sleep(1000)\n",
    "kill process groups": ("import os, time\nfor group in (os.getpgid(os.getppid()), os.getpgid(0)):\n    try:\n"
                            "        os.killpg(group, 9)\n    except OSError:\n        pass\ntime.sleep(1000)\n"),
    "environment secret": "import os\nprint(os.environ.get('SECRET', 'none'))\n",
    "secret of other processes": ("import os\nfor pid in os.listdir('/proc'):\n    try:\n"
                                  "        env = open(f'/proc/{pid}/environ', 'rb').read()\n    except OSError:\n"
                                  "        continue\n    if b'SECRET=' in env:\n        print(env)\n"),
    "read this file": f"print(open({str(Path(__file__).resolve())!r}).read())\n",
    "read home": f"import os\nprint(os.listdir({str(Path.home())!r}))\n",
    "write sysctl": ("path = '/proc/sys/kernel/pid_max'\nvalue = open(path).read()\n"
                     "with open(path, 'w') as f:\n    f.write(value)\nprint('written')\n"),
    "capabilities": ("line = [l for l in open('/proc/self/status') if l.startswith('CapEff')][0]\n"
                     "print('privileged' if int(line.split()[1], 16) else 'none')\n"),
}


@needs_bwrap
@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_hostile_tool_call_leaves_the_host_untouched_and_the_conversation_going(name, monkeypatch, tmp_path):
    monkeypatch.setenv("SECRET", "hunter2")
    tagged, env = Tagged(), PythonTool(limits=FAST)
    env.reset({}, ASK, seed=0)
    start = time.monotonic()
    reply = env.step(call(tagged.program(ATTACKS[name])))
    assert time.monotonic() - start < FAST.wall_seconds + 3
    assert not reply.done and reply.message["role"] == "tool"  # the model reads what happened; the run goes on
    content = reply.message["content"]
    assert "hunter2" not in content and "privileged" not in content and "written" not in content
    assert Path(__file__).read_text()[:200] not in content
    if name == "read this file":  # the project is not there to read
        assert "FileNotFoundError" in content or "PermissionError" in content
    if name == "read home":  # not there, or nothing of it but the interpreter bound read-only
        shown = content.split("\n")[1]
        if shown.startswith("["):
            assert set(ast.literal_eval(shown)) < set(os.listdir(Path.home()))
        else:
            assert "FileNotFoundError" in content or "PermissionError" in content
    assert tagged.survivors() == []
    assert env.step("The answer is \\boxed{9716}.").done  # and the trajectory still ends normally


@needs_bwrap
def test_tool_calls_reach_neither_the_network_nor_files_outside(tmp_path):
    target = tmp_path / "pwned"
    env = PythonTool(limits=FAST)
    env.reset({}, ASK, seed=0)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        env.step(call(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('in')\n"))
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    wrote = env.step(call(f"open({str(target)!r}, 'w').write('x')\nprint('written')\n"))
    assert not target.exists() and "written" not in wrote.message["content"]


def test_guess_the_number_gives_feedback_and_rewards_a_quick_find():
    env = GuessNumber(max_turns=5)
    messages = env.reset({"secret": 37}, ASK[:0], seed=0)
    assert "from 1 to 100" in messages[-1]["content"]
    assert env.step("\\boxed{50}").message["content"] == "Lower."
    assert env.step("I think \\boxed{25}").message["content"] == "Higher."
    assert env.step("thirty").message["content"] == "Give one whole number in \\boxed{}."
    found = env.step("\\boxed{37}")
    assert found.done and found.reward == pytest.approx(1 - 0.5 * 3 / 4)
    env.reset({"secret": 37}, [], seed=0)
    assert env.step("\\boxed{37}").reward == 1.0  # first guess: full reward


def test_guess_the_number_ends_with_0_when_the_turns_run_out_and_draws_from_the_seed():
    env = GuessNumber(max_turns=2)
    env.reset({"secret": 3}, [], seed=0)
    env.step("\\boxed{1}")
    last = env.step("\\boxed{2}")
    assert last.done and last.reward == 0.0
    secrets = []
    for seed in (0, 0, 1):
        game = GuessNumber()
        game.reset({}, [], seed=seed)
        secrets.append(game.secret)
    assert secrets[0] == secrets[1] and 1 <= secrets[2] <= 100  # the same seed, the same game (exact resume)


USER_ENV = '''
class Echo:
    def __init__(self, rounds=1):
        self.rounds = rounds

    def reset(self, row, messages, seed):
        return messages

    def step(self, text):
        from rlvr.envs import Reply
        self.rounds -= 1
        return Reply(message={"role": "user", "content": text.upper()}, done=self.rounds < 0)
'''


def test_user_environments_load_from_a_file_and_mistakes_are_one_line(tmp_path):
    path = tmp_path / "my_env.py"
    no_step = "\nNOT_A_CLASS = 3\nclass NoStep:\n    def reset(self, row, messages, seed):\n        pass\n"
    path.write_text(USER_ENV + no_step)
    env = load_environment(f"{path}:Echo", rounds=1)()
    assert env.step("hi").message["content"] == "HI" and env.step("x").done
    for spec, params, message in [
        (f"{path}:Ecco", {}, "did you mean 'Echo'"),
        (f"{path}:NOT_A_CLASS", {}, "is an int, not a class"),
        (f"{path}:NoStep", {}, "has no step method"),
        (f"{path}:Echo", {"turns": 2}, "its parameters do not fit"),
        (f"{tmp_path}/missing.py:Echo", {}, "not found"),
        ("pythn_tool", {}, "did you mean 'python_tool'"),
    ]:
        with pytest.raises(UserError, match=message):
            load_environment(spec, **params)


def test_an_example_exchange_showing_a_call_goes_before_the_question():
    example = [{"role": "user", "content": "What is 2 * 3?"},
               {"role": "assistant", "content": "```python\nprint(6)\n```"},
               {"role": "tool", "content": "```output\n6\n```"}, {"role": "assistant", "content": "\\boxed{6}"}]
    out = PythonTool(example=example).reset({}, [{"role": "system", "content": "Be brief."}, *ASK], seed=0)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert out[1:5] == example and out[-1] == ASK[0]
