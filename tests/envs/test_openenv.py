"""OpenEnv environments as driven rlvr environments (`environment.name: openenv:...`): the action from the model's
message, the observation as the next message, the episode's reward; in process and over openenv-core's server;
training, exact resume and `rlvr eval`."""

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("openenv.core")

from rlvr.envs.loading import load_environment
from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo

from ..train.resumed import assert_resumes_exactly
from ..train.test_step import tiny_config

GAME = Path(__file__).with_name("openenv_envs.py")
LOCAL = f"openenv:{GAME}:NumberGuess"


def settings(name, *extra):
    return [f"environment.name={name}", "environment.params={}" if name.startswith("openenv:http") else
            "environment.params.max_tries=2", "environment.max_turns=3", "environment.max_tokens=300",
            "environment.reply_to_cut=true", "rewards=[{name: environment_reward}]", "generation.max_new_tokens=4",
            "eval_before=false",
            "eval_after=false", "sample_every=1", *extra]


def test_the_model_plays_the_openenv_game_by_its_rules():
    env = load_environment(LOCAL, max_tries=3)()
    first = env.reset({}, [{"role": "user", "content": "play"}], seed=5)
    assert first[-1] == {"role": "user", "content": "Guess a digit from 0 to 9."}
    secret = __import__("random").Random(5).randrange(10)
    wrong = (secret + 1) % 10
    reply = env.step(f"I say {wrong}")
    assert reply.message == {"role": "user", "content": "higher" if wrong < secret else "lower"} and not reply.done
    done = env.step(f"then {secret}")
    assert done.done and done.reward == 1.0 and done.message is None


def test_mistakes_are_one_line():
    with pytest.raises(UserError, match=r"building it with \{'nope': 1\} raised TypeError"):
        load_environment(LOCAL, nope=1)
    with pytest.raises(UserError, match="no OpenEnv server answers at http://127.0.0.1:9"):
        load_environment("openenv:http://127.0.0.1:9")


def test_an_openenv_game_trains_resumes_exactly_and_evaluates(tmp_path):
    assert_resumes_exactly(tmp_path, *settings(LOCAL))
    metrics = [json.loads(x) for x in (tmp_path / "a" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(m["env/turns"] >= 1 and "env/invalid_actions" in m for m in metrics)
    from rlvr.cli import main

    assert main(["eval", "--model", "tiny", "--data", "arithmetic", "--limit", "2", "--samples", "2",
                 "--max-new-tokens", "4", "--set", f"environment.name={LOCAL}", "--set", "environment.max_turns=2",
                 "--output-dir", str(tmp_path / "e")]) == 0
    settings_ = json.loads((tmp_path / "e" / "settings.json").read_text())
    assert settings_["environment"]["name"] == LOCAL


def test_every_game_is_closed_however_it_ended(tmp_path):
    """One turn of a game of two tries: most games run out of turns rather than end; each is closed anyway."""
    from rlvr.user_code import load_user_object

    game = load_user_object(LOCAL.removeprefix("openenv:"), "environment", "class", "")  # (the class rlvr loads)
    alive = game.alive  # (games other tests built and kept)
    train_grpo(tiny_config(tmp_path, *settings(LOCAL, "environment.max_turns=1")))
    games = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert any(r == 0.0 for g in games for r in g["rewards"])  # (games that did not end)
    assert game.alive == alive


@pytest.fixture()
def server(request):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sessions = getattr(request, "param", 64)
    proc = subprocess.Popen([sys.executable, str(GAME), str(port), str(sessions)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):  # (up to 30 s for the server to start)
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("the OpenEnv server did not start within 30 s")
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_an_openenv_server_trains_as_the_same_game_in_process(tmp_path, server):
    train_grpo(tiny_config(tmp_path / "local", *settings(LOCAL, "environment.params.max_tries=3")))
    train_grpo(tiny_config(tmp_path / "remote", *settings(f"openenv:{server}")))
    local, remote = ([json.loads(x) for x in (tmp_path / d / "run" / "samples.jsonl").read_text().splitlines()]
                     for d in ("local", "remote"))
    assert [g["transcripts"] for g in local] == [g["transcripts"] for g in remote]  # the same games, step by step
    assert [g["rewards"] for g in local] == [g["rewards"] for g in remote]


@pytest.mark.parametrize("server", [8], indirect=True)  # (a step's 8 games at once, no more)
def test_a_server_with_room_for_one_steps_games_serves_every_step(tmp_path, server):
    """A game that runs out of turns gives its server session back: the next step's games find room."""
    train_grpo(tiny_config(tmp_path, *settings(f"openenv:{server}", "environment.max_turns=1"), steps=3))
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize("server", [2], indirect=True)
def test_a_server_with_fewer_sessions_than_a_steps_games_is_served_in_waves_of_max_sessions(tmp_path, server):
    """A step opens a session per game (8 here): a server made with max_concurrent_envs=2 refused the third, and
    the line asked whether the running server was running."""
    with pytest.raises(UserError) as e:
        train_grpo(tiny_config(tmp_path / "a", *settings(f"openenv:{server}", "environment.max_turns=1")))
    assert "is at capacity" in str(e.value) and "set environment.max_sessions" in str(e.value)
    assert "is it running" not in str(e.value)
    train_grpo(tiny_config(tmp_path / "b", *settings(f"openenv:{server}", "environment.max_turns=1",
                                                     "environment.max_sessions=2"), steps=2))
    assert len((tmp_path / "b" / "run" / "metrics.jsonl").read_text().splitlines()) == 2


def test_an_environment_made_by_openenv_init_trains_as_it_is(tmp_path):
    """`openenv init` writes server/<name>_environment.py, which imports `models` from the environment's root and
    whose reset(self) takes no seed: it failed to import, then to reset (OpenEnv's server passes only what the
    signature takes)."""
    cli = Path(sys.executable).with_name("openenv")
    if not cli.is_file():
        pytest.skip("openenv-core's command is not installed beside this Python")
    subprocess.run([str(cli), "init", "echo_game"], cwd=tmp_path, check=True, capture_output=True, timeout=120)
    source = tmp_path / "echo_game" / "server" / "echo_game_environment.py"
    name = f"openenv:{source}:EchoGameEnvironment"
    train_grpo(tiny_config(tmp_path, f"environment.name={name}", "environment.max_turns=2",
                           "rewards=[{name: environment_reward}]", "generation.max_new_tokens=4", "eval_before=false",
                           "eval_after=false"))
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 2


def test_an_openenv_mcp_environments_tools_reach_the_model_and_are_called(tiny, monkeypatch):
    """An MCPEnvironment's tools were never listed (every message an invalid action): they are offered as function
    tools, a call is a CallToolAction whose result is the next message, a message without a call the answer."""
    from rlvr.envs.sampling import sample_conversations
    from rlvr.records import Example
    from rlvr.rollout import SamplingParams

    from .test_converse import ASK, scripted_model

    make = load_environment(f"openenv:{GAME}:Calculator")
    env = make()
    assert [t["function"]["name"] for t in env.tools] == ["add"]
    model, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ['<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>',
                                            "It is 5."])
    out = sample_conversations(model, tokenizer, [Example("q")], [ASK], 1, SamplingParams(80, 1.0), make_env=make,
                               max_turns=3, max_tokens=600, stop_ids=[tokenizer.eos_token_id], seeds=[7])
    assert [m["role"] for m in out.transcripts[0]] == ["assistant", "tool", "assistant"]
    assert out.transcripts[0][1]["content"] == "5" and out.env_info[0]["tool_calls"] == 1.0
