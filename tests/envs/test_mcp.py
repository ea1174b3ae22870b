"""An MCP server's tools as a driven environment (`environment.name: mcp:...`, rlvr.envs.mcp_tools): listed to the
model, called when it calls them, their answers tool messages; a run trains with them."""

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from rlvr.envs.loading import load_environment
from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo

from ..train.test_step import tiny_config
from .test_converse import ASK, scripted_model

SERVER = f"mcp:{sys.executable} {Path(__file__).with_name('mcp_server.py')}"


@pytest.fixture(scope="module")
def make():
    return load_environment(SERVER, max_calls=3)


def test_the_servers_tools_are_offered_with_their_schemas(make):
    env = make()
    add = next(t["function"] for t in env.tools if t["function"]["name"] == "add")
    assert add["description"] == "Add two integers."
    assert add["parameters"]["properties"] == {"a": {"title": "A", "type": "integer"},
                                               "b": {"title": "B", "type": "integer"}}


def test_each_call_is_made_and_its_answer_or_error_comes_back_as_a_tool_message(make):
    env = make()
    env.reset({}, ASK, seed=0)
    reply = env.step("", [{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}},
                          {"id": "c2", "name": "divide", "arguments": {"a": 1, "b": 0}},
                          {"id": "c3", "name": "nope", "arguments": {}}])
    assert not reply.done and [m["tool_call_id"] for m in reply.message] == ["c1", "c2", "c3"]
    assert reply.message[0]["content"] == "5" and "division by zero" in reply.message[1]["content"]
    assert "nope" in reply.message[2]["content"] and reply.info == {"tool_calls": 3.0, "tool_errors": 2.0}
    assert env.step("It is 5.", []).done  # (no call: the final answer)
    assert env.step("", [{"id": "c4", "name": "add", "arguments": {"a": 1, "b": 1}}]).done  # (past max_calls)


def test_closing_leaves_the_session_in_the_task_that_opened_it_and_the_server_ends():
    """What runs at the process's end (atexit): the client's task groups exit where they were entered (else anyio
    prints 'Attempted to exit cancel scope in a different task' as the process ends), and the server process
    with them."""
    import psutil

    from rlvr.envs.mcp_tools import mcp_factory

    def running():
        return {p for p in psutil.Process().children(recursive=True) if "mcp_server.py" in " ".join(p.cmdline())}

    before = running()  # (the module's own session: it stays)
    session = mcp_factory(SERVER, max_calls=1)().session
    servers = running() - before
    assert servers and session.call("add", {"a": 1, "b": 2}) == ("3", False)
    session.close()
    assert session._held.done() and session._held.exception() is None
    psutil.wait_procs(servers, timeout=10)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in servers)


def test_a_server_that_cannot_start_is_one_line():
    with pytest.raises(UserError, match="could not reach the MCP server"):
        load_environment("mcp:/no/such/server --flag")


def test_a_conversation_calls_the_tool_and_reads_its_answer(tiny, monkeypatch, make):
    """The model (scripted) calls add in the template's form; the server's answer is the next message."""
    from rlvr.envs.sampling import sample_conversations
    from rlvr.records import Example
    from rlvr.rollout import SamplingParams

    model, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ['<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>',
                                            "It is 5."])
    out = sample_conversations(model, tokenizer, [Example("q")], [ASK], 1, SamplingParams(80, 1.0), make_env=make,
                               max_turns=3, max_tokens=600, stop_ids=[tokenizer.eos_token_id], seeds=[7])
    transcript = out.transcripts[0]
    assert [m["role"] for m in transcript] == ["assistant", "tool", "assistant"]
    assert transcript[1]["content"] == "5" and out.completions == ["It is 5."]
    assert out.env_info[0]["tool_calls"] == 1.0 and out.env_info[0]["tool_errors"] == 0.0


def test_a_run_trains_with_an_mcp_servers_tools(tmp_path):
    train_grpo(tiny_config(tmp_path, f"environment.name={SERVER}", "environment.max_turns=2",
                           "generation.max_new_tokens=6", "eval_before=false", "eval_after=false"))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all("env/turns" in m for m in lines)
