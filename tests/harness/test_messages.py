"""Anthropic's Messages API on the policy's endpoint (rlvr.harness.messages): the chat completion underneath,
recorded, spliced and refused by the same rules; an `anthropic` SDK agent's tool loop trains as one row."""

import json
import urllib.request

import pytest

from rlvr.envs.template import chat_prompt_ids
from rlvr.harness.group import Link, run_group
from rlvr.harness.rows import segments

from . import agents
from .test_endpoint import post

pytest.importorskip("anthropic")


def test_a_message_is_the_chat_completion_underneath_recorded_exactly(endpoint):
    rollout = endpoint.open(seed=3)
    client = Link(rollout.base_url, rollout.key).anthropic()
    answer = client.messages.create(model="policy", max_tokens=8, system="Be brief.",
                                    messages=[{"role": "user", "content": "What is 2 + 2?"}])
    (turn,) = rollout.recorder.turns
    asked = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]
    assert turn.prompt_ids == chat_prompt_ids(endpoint.tokenizer, asked, None) and len(turn.token_ids) <= 8
    assert answer.content[0].text == endpoint.tokenizer.decode(turn.token_ids, skip_special_tokens=True)
    assert answer.usage.output_tokens == len(turn.token_ids)
    assert answer.stop_reason == ("max_tokens" if turn.finish_reason == "length" else "end_turn")


@pytest.mark.parametrize(("body", "said"), [
    ({"tool_choice": {"type": "any"}}, "tool_choice={'type': 'any'}: the policy's endpoint cannot force a tool call"),
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking: the policy's endpoint has no extended"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "content[0].type='image'"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "is a server tool"),
    ({"temperature": "hot"}, "temperature='hot': give a number"),
])
def test_what_a_message_cannot_be_is_refused_naming_the_field_in_anthropics_error_form(endpoint, body, said):
    rollout = endpoint.open(seed=1)
    status, answer = post(f"{rollout.base_url}/messages", {
        "model": "policy", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], **body})
    assert status == 400 and answer["type"] == "error" and said in answer["error"]["message"]
    assert not rollout.recorder.turns


def test_a_streamed_message_is_the_sdks_stream(endpoint):
    rollout = endpoint.open(seed=5)
    client = Link(rollout.base_url, rollout.key).anthropic()
    with client.messages.stream(model="policy", max_tokens=6, messages=[{"role": "user", "content": "Hi"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    (turn,) = rollout.recorder.turns
    assert text == final.content[0].text == endpoint.tokenizer.decode(turn.token_ids, skip_special_tokens=True)


def test_an_anthropic_sdk_agents_tool_loop_trains_as_one_row(endpoint, calls_then_answers):
    (run,) = run_group(endpoint, agents.anthropic_tool_loop, {"prompt": "What is 2 + 3?"}, seeds=[1], timeout_s=120)
    assert run.error is None and run.reward == 1.0 and run.turns == 2
    (row,) = run.rows
    trained = endpoint.tokenizer.decode([t for t, m in zip(row.ids, row.model_mask) if m])
    assert trained.startswith("<tool_call>") and trained.endswith("5<|im_end|>")


def test_a_streamed_tool_use_carries_its_input(endpoint, calls_then_answers):
    rollout = endpoint.open(seed=2)
    tools = [{"name": "add", "input_schema": {"type": "object"}}]
    request = urllib.request.Request(f"{rollout.base_url}/messages", method="POST", data=json.dumps({
        "model": "policy", "max_tokens": 64, "stream": True, "tools": tools,
        "messages": [{"role": "user", "content": "2 + 3?"}]}).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        events = [json.loads(line.removeprefix("data: ")) for line in response.read().decode().split("\n")
                  if line.startswith("data: ")]
    delta = next(e["delta"] for e in events if e["type"] == "content_block_delta")
    assert json.loads(delta["partial_json"]) == {"a": 2, "b": 3}
    assert [e["type"] for e in events][-2:] == ["message_delta", "message_stop"]
    assert events[-2]["delta"]["stop_reason"] == "tool_use"
    assert [row.turns for row in segments(rollout.recorder.turns)] == [1]
