"""Python functions as the model's tools (`environment: {name: tools, params: {tools: [...]}}`, TRL's `tools=`,
rlvr.envs.function_tools): described to the model as transformers describes them, called when it calls them."""

import json
from pathlib import Path

import pytest

from rlvr.envs.loading import load_environment
from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo

from ..train.test_step import tiny_config
from .test_converse import ASK, scripted_model
from .tools import add, divide, lookup

TOOLS = Path(__file__).with_name("tools.py")


def test_each_function_is_offered_with_transformers_schema_of_it():
    env = load_environment("tools", tools=[f"{TOOLS}:add", lookup])()
    schema = next(t["function"] for t in env.tools if t["function"]["name"] == "add")
    assert schema["description"] == "Add two integers."
    assert schema["parameters"]["properties"] == {"a": {"type": "integer", "description": "the first number"},
                                                  "b": {"type": "integer", "description": "the second number"}}
    assert [t["function"]["name"] for t in env.tools] == ["add", "lookup"]


def test_each_call_is_made_and_its_answer_or_error_comes_back_as_a_tool_message():
    env = load_environment("tools", tools=[add, lookup, divide])()
    reply = env.step("", [{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}},
                          {"id": "c2", "name": "lookup", "arguments": {"word": "cat"}},  # (async: awaited)
                          {"id": "c3", "name": "divide", "arguments": {"a": 1, "b": 0}},
                          {"id": "c4", "name": "nope", "arguments": {}},
                          {"id": "c5", "name": "add", "arguments": {"a": 1}},
                          {"id": "c6", "name": "add", "arguments": "2 and 3"}])
    contents = [m["content"] for m in reply.message]
    assert [m["tool_call_id"] for m in reply.message] == ["c1", "c2", "c3", "c4", "c5", "c6"] and not reply.done
    assert contents[:2] == ["5", '{"word": "cat", "letters": 3}']
    errors = [json.loads(c)["error"] for c in contents[2:]]
    assert errors[0] == "ZeroDivisionError: division by zero" and "no tool named 'nope'" in errors[1]
    assert "missing 1 required positional argument: 'b'" in errors[2] and "not a JSON object" in errors[3]
    assert reply.info == {"tool_calls": 6.0, "tool_errors": 4.0}
    assert env.step("It is 5.", []).done  # (no call: the final answer)


@pytest.mark.parametrize(("tools", "said"), [
    ([f"{TOOLS}:undocumented"], "tool 'undocumented' cannot be described to the model"),
    ([add, add], "two tools are named 'add'"),
    ([], "needs params.tools: a list of functions"),
    ([f"{TOOLS}:nope"], "nope"),
])
def test_a_tool_that_cannot_be_offered_is_one_line_when_loaded(tools, said):
    with pytest.raises(UserError, match=said) as e:
        load_environment("tools", tools=tools)
    assert "\n" not in str(e.value)


def test_a_conversation_calls_a_tool_and_reads_its_answer(tiny, monkeypatch):
    from rlvr.envs.sampling import sample_conversations
    from rlvr.records import Example
    from rlvr.rollout import SamplingParams

    model, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ['<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>',
                                            "It is 5."])
    out = sample_conversations(model, tokenizer, [Example("q")], [ASK], 1, SamplingParams(80, 1.0),
                               make_env=load_environment("tools", tools=[add]), max_turns=3, max_tokens=600,
                               stop_ids=[tokenizer.eos_token_id], seeds=[7])
    assert [m["role"] for m in out.transcripts[0]] == ["assistant", "tool", "assistant"]
    assert out.transcripts[0][1]["content"] == "5" and out.completions == ["It is 5."]
    assert out.env_info[0]["tool_calls"] == 1.0 and out.env_info[0]["tool_errors"] == 0.0


def test_a_run_trains_with_functions_as_tools_named_in_the_config(tmp_path):
    train_grpo(tiny_config(tmp_path, "environment.name=tools", f"environment.params.tools=['{TOOLS}:add']",
                           "environment.max_turns=2", "generation.max_new_tokens=6", "eval_before=false",
                           "eval_after=false"))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all("env/turns" in m for m in lines)
