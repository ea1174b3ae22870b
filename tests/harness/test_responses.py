"""OpenAI's Responses API on the policy's endpoint (rlvr.harness.responses): the chat completion underneath,
recorded, spliced and refused by the same rules; the OpenAI Agents SDK's Runner trains through it unchanged."""

import json
import urllib.request

import pytest

from rlvr.envs.template import chat_prompt_ids
from rlvr.harness.group import Link, run_group
from rlvr.harness.rows import segments

from . import agents
from .test_endpoint import post

pytest.importorskip("openai")


def test_a_response_is_the_chat_completion_underneath_recorded_exactly(endpoint):
    rollout = endpoint.open(seed=3)
    client = Link(rollout.base_url, rollout.key).openai()
    response = client.responses.create(model="policy", input="What is 2 + 2?", instructions="Be brief.")
    (turn,) = rollout.recorder.turns
    asked = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]
    assert turn.prompt_ids == chat_prompt_ids(endpoint.tokenizer, asked, None)
    assert response.output_text == endpoint.tokenizer.decode(turn.token_ids, skip_special_tokens=True)
    assert response.usage.output_tokens == len(turn.token_ids)
    assert response.status == ("incomplete" if turn.finish_reason == "length" else "completed")


def test_previous_response_id_continues_the_recorded_turn_as_one_row(endpoint):
    rollout = endpoint.open(seed=4)
    client = Link(rollout.base_url, rollout.key).openai()
    first = client.responses.create(model="policy", input="What is 2 + 2?")
    client.responses.create(model="policy", input="Sure?", previous_response_id=first.id)
    turns = rollout.recorder.turns
    assert turns[1].prompt_ids[:len(turns[0].prompt_ids) + len(turns[0].token_ids)] == \
        turns[0].prompt_ids + turns[0].token_ids  # (its ids spliced, never rendered again)
    assert [row.turns for row in segments(turns)] == [2]


@pytest.mark.parametrize(("body", "said"), [
    ({"input": "hi", "previous_response_id": "resp_nope"}, "previous_response_id='resp_nope' is no response"),
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "'web_search' is a hosted tool"),
    ({"input": "hi", "conversation": "conv_1"}, "conversation: the policy's endpoint does not serve"),
    ({"input": "hi", "text": {"format": {"type": "json_object"}}}, "text.format={'type': 'json_object'}"),
    ({"input": [{"type": "input_image", "image_url": "x"}]}, "input[0].type='input_image'"),
    ({"input": "hi", "temperature": "hot"}, "temperature='hot': give a number"),
])
def test_what_a_response_cannot_be_is_refused_naming_the_field(endpoint, body, said):
    rollout = endpoint.open(seed=1)
    status, answer = post(f"{rollout.base_url}/responses", {"model": "policy", **body})
    assert status == 400 and said in answer["error"]["message"] and not rollout.recorder.turns


def test_a_streamed_response_ends_with_the_whole_response(endpoint):
    rollout = endpoint.open(seed=5)
    request = urllib.request.Request(f"{rollout.base_url}/responses", method="POST",
                                     data=json.dumps({"model": "policy", "input": "Hi", "stream": True}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        events = [json.loads(line.removeprefix("data: ")) for line in response.read().decode().split("\n")
                  if line.startswith("data: ")]
    assert events[0]["type"] == "response.created" and events[-1]["type"] in ("response.completed",
                                                                              "response.incomplete")
    text = events[-1]["response"]["output"][0]["content"][0]["text"]
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == text
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_an_openai_agents_sdk_runner_trains_through_the_endpoint_unchanged(endpoint, calls_then_answers):
    """The Agents SDK speaks the Responses API (it was a 404): its tool loop is one row, the tool's result context."""
    pytest.importorskip("agents")
    (run,) = run_group(endpoint, agents.openai_agents_sdk, {"prompt": "What is 2 + 3?"}, seeds=[1], timeout_s=120)
    assert run.error is None and run.reward == 1.0 and run.turns == 2
    (row,) = run.rows
    trained = endpoint.tokenizer.decode([t for t, m in zip(row.ids, row.model_mask) if m])
    context = endpoint.tokenizer.decode([t for t, m in zip(row.ids, row.model_mask) if not m])
    assert trained.startswith("<tool_call>") and trained.endswith("5<|im_end|>")  # (the call, then the answer)
    assert "tool\n5" in context  # (the tool's answer, as the template renders it: context, not trained)
