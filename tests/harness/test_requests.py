"""The endpoint's one rule for what an agent asks (rlvr.harness.request): the run's distribution served whatever the
request says, what cannot be honoured refused naming the field, a malformed field a 400, never a 500."""

import copy
import json
import urllib.request

import pytest
import torch

from rlvr.envs.template import renders_tools
from rlvr.harness import Endpoint
from rlvr.harness.group import run_group
from rlvr.models import build_tiny_model
from rlvr.run.policy import Policy
from rlvr.samplers import LocalSampler

from .test_endpoint import HI, PARAMS, post

CALLS = [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}]


@pytest.fixture(scope="module")
def model():
    return build_tiny_model(seed=0)


def serve(model, tokenizer=None, **options):
    policy = Policy(model[0], device=torch.device("cpu"), dtype=torch.float32)
    tokenizer = tokenizer or model[1]
    return Endpoint(LocalSampler(policy.decoding, tokenizer, weights=policy.named_weights), tokenizer, PARAMS,
                    **options)


@pytest.fixture
def endpoint(model):
    served = serve(model)
    yield served
    served.close()


def chat(endpoint, body, seed=1):
    rollout = endpoint.open(seed=seed)
    status, answer = post(f"{rollout.base_url}/chat/completions", body)
    return status, answer, rollout.recorder


@pytest.mark.parametrize(("field", "said"), [
    ({"temperature": "hot"}, "temperature='hot': give a number"),
    ({"temperature": [1]}, "temperature=[1]: give a number"),
    ({"top_p": None, "top_k": True}, "top_k=True: give a number"),
    ({"tools": "junk"}, "tools='junk': give a list of"),
    ({"tools": [1, 2]}, "tools='[1, 2]': give a list of"),
    ({"tools": {"a": 1}}, "tools=\"{'a': 1}\": give a list of"),
    ({"max_tokens": "5"}, "max_tokens='5': give a whole number of tokens"),
    ({"max_completion_tokens": 0}, "max_completion_tokens=0: give a whole number of tokens, 1 or more"),
    ({"n": "2"}, "n='2': ask for 1 to 16 choices"),
    ({"stream_options": "usage"}, "stream_options='usage': give an object"),
    ({"stream": "yes"}, "stream='yes': give true or false"),
    ({"stream": 1}, "stream=1: give true or false"),
    ({"top_logprobs": "x"}, "top_logprobs='x': give a whole number"),
])
def test_a_malformed_field_is_a_400_naming_it_not_the_endpoints_failure(endpoint, field, said):
    """They were 500s ("rlvr's endpoint failed"), which the step's verdict then blamed on the endpoint."""
    status, answer, recorder = chat(endpoint, {"messages": HI, **field})
    assert status == 400 and said in answer["error"]["message"] and not endpoint.failures and not recorder.turns


@pytest.mark.parametrize(("field", "said"), [
    ({"response_format": {"type": "json_object"}}, "response_format={'type': 'json_object'}: the policy's endpoint "
                                                   "cannot constrain its output"),
    ({"response_format": {"type": "json_schema", "json_schema": {}}}, "cannot constrain its output"),
    ({"tools": TOOLS, "tool_choice": "required"}, "tool_choice='required': the policy's endpoint cannot force"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "add"}}}, "cannot force a tool call"),
    ({"frequency_penalty": 0.5}, "frequency_penalty=0.5: it changes the distribution training samples from"),
    ({"presence_penalty": -1}, "presence_penalty=-1: it changes the distribution"),
    ({"logit_bias": {"5": 10}}, "logit_bias: biases change the distribution"),
    ({"repetition_penalty": 1.1}, "repetition_penalty=1.1: it changes the distribution"),  # (vLLM's extra_body)
    ({"min_p": 0.05}, "min_p=0.05: it changes the distribution"),
    ({"logprobs": True, "top_logprobs": 3}, "top_logprobs=3: the endpoint gives each chosen token's log-prob"),
])
def test_what_the_endpoint_cannot_honour_is_refused_naming_the_field(endpoint, field, said):
    """Each was answered 200 as if honoured."""
    status, answer, _ = chat(endpoint, {"messages": HI, **field})
    assert status == 400 and said in answer["error"]["message"]


@pytest.mark.parametrize("field", [
    {"response_format": {"type": "text"}}, {"tools": TOOLS, "tool_choice": "auto"}, {"frequency_penalty": 0},
    {"presence_penalty": 0.0}, {"logit_bias": {}}, {"logprobs": True, "top_logprobs": 0}, {"seed": 7, "user": "u"},
    {"top_k": -1}, {"tools": []}, {"repetition_penalty": 1.0, "min_p": 0, "skip_special_tokens": False},
])
def test_what_changes_nothing_drawn_is_served(endpoint, field):
    assert chat(endpoint, {"messages": HI, **field})[0] == 200


def test_another_temperature_or_budget_is_served_at_the_runs_counted_and_said_once(endpoint, capsys):
    """An agent written for temperature 1.0 and 512 tokens runs unchanged (it was refused every request): it is
    drawn as the run draws (the same tokens as a request that asked nothing), its budget the run's limit."""
    plain = chat(endpoint, {"messages": HI}, seed=5)[1]["choices"][0]
    for body in ({"temperature": 0.2, "top_p": 0.5}, {"max_tokens": 512}, {"max_completion_tokens": 13}):
        status, answer, recorder = chat(endpoint, {"messages": HI, **body}, seed=5)
        choice = answer["choices"][0]
        assert status == 200 and choice["token_ids"] == plain["token_ids"] and recorder.overridden == 1
        assert choice["finish_reason"] == plain["finish_reason"]  # ("length" at the run's 12 tokens, if cut there)
    err = capsys.readouterr().err
    for what in ("temperature=0.2", "top_p=0.5", "max_tokens=512", "max_completion_tokens=13"):
        assert err.count(f"an agent asked {what}: served at the run's value") == 1
    chat(endpoint, {"messages": HI, "temperature": 0.3})
    assert "an agent asked" not in capsys.readouterr().err  # (once a run, not once a request)


def test_strict_requests_refuses_another_distribution_or_budget(model):
    strict = serve(model, strict=True)
    try:
        for body, said in (({"temperature": 0.2}, "temperature=0.2 differs from the run's 1.0 (generation.temp"),
                           ({"max_tokens": 13}, "max_tokens=13: ask for 1 to 12 tokens (generation.max_new_tokens")):
            status, answer, _ = chat(strict, {"messages": HI, **body})
            assert status == 400 and said in answer["error"]["message"]
        assert chat(strict, {"messages": HI, "temperature": 1.0, "max_tokens": 12})[0] == 200
    finally:
        strict.close()


def test_a_prompt_beyond_the_models_context_is_refused_and_one_near_it_served_within_it(model):
    """As vLLM answers a prompt longer than its max_model_len; the budget is what the context leaves."""
    tokenizer = model[1]
    short = len(post_ids(tokenizer, HI))
    bounded = serve(model, context=short + 3)
    try:
        status, answer, _ = chat(bounded, {"messages": HI})
        assert status == 200 and len(answer["choices"][0]["token_ids"]) <= 3
        long = [{"role": "user", "content": "What is 2 + 2? " * 4}]
        status, answer, recorder = chat(bounded, {"messages": long})
        assert status == 400 and f"and the model's context is {short + 3}: no room" in answer["error"]["message"]
        assert not recorder.turns
    finally:
        bounded.close()


def post_ids(tokenizer, messages):
    from rlvr.envs.template import chat_prompt_ids

    return chat_prompt_ids(tokenizer, messages, None)


def test_a_stream_asking_for_its_usage_gets_it_in_a_last_chunk(endpoint):
    rollout = endpoint.open(seed=3)
    body = {"messages": HI, "stream": True, "stream_options": {"include_usage": True}}
    request = urllib.request.Request(f"{rollout.base_url}/chat/completions", method="POST",
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        lines = [line for line in response.read().decode().split("\n") if line.startswith("data: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    turn = rollout.recorder.turns[0]
    assert events[-1]["choices"] == [] and events[-1]["usage"] == {
        "prompt_tokens": len(turn.prompt_ids), "completion_tokens": len(turn.token_ids),
        "total_tokens": len(turn.prompt_ids) + len(turn.token_ids)}
    assert all("usage" not in e for e in events[:-1])


def with_template(model, template):
    tokenizer = copy.deepcopy(model[1])
    tokenizer.chat_template = template
    return tokenizer


def test_an_assistant_message_of_tool_calls_with_no_content_renders_where_a_template_reads_content(model):
    """What verifiers and the openai SDK send back (content None beside tool_calls), not continuing a recorded
    turn: a template that reads every message's content (SmolLM2's) failed on it, a 500."""
    template = "{% for m in messages %}{{ m['role'] + ': ' + m['content'] }}\n{% endfor %}assistant:"
    served = serve(model, with_template(model, template))
    try:
        messages = [*HI, {"role": "assistant", "content": None, "tool_calls": CALLS},
                    {"role": "tool", "tool_call_id": "c1", "content": "3"}]
        assert chat(served, {"messages": messages, "tools": TOOLS})[0] == 200
    finally:
        served.close()


def test_messages_the_template_cannot_render_are_a_400_naming_the_template(model):
    template = ("{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tool role here') }}"
                "{% endif %}{{ m['content'] }}{% endfor %}")
    served = serve(model, with_template(model, template))
    try:
        messages = [*HI, {"role": "tool", "tool_call_id": "c1", "content": "3"}]
        status, answer, _ = chat(served, {"messages": messages})
        assert status == 400 and "the model's chat template cannot render these messages" in answer["error"]["message"]
        assert "no tool role here" in answer["error"]["message"] and not served.failures
    finally:
        served.close()


def test_tools_offered_to_a_template_that_drops_them_are_said_once(model, capsys):
    """SmolLM2's template shows no tools: the model cannot call what it never sees, and env/calls stayed 0 with
    nothing said."""
    drops = with_template(model, "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    shows = with_template(model, "{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}"
                                 "{{ m['content'] }}{% endfor %}")
    assert not renders_tools(drops) and renders_tools(shows)
    for tokenizer, said in ((shows, 0), (drops, 1)):
        served = serve(model, tokenizer)
        try:
            chat(served, {"messages": HI, "tools": TOOLS})
            chat(served, {"messages": HI, "tools": TOOLS})
        finally:
            served.close()
        assert capsys.readouterr().err.count("the model's chat template does not show them") == said


def asks_another_temperature(link, row):
    link.chat([{"role": "user", "content": row["question"]}], temperature=0.3)
    link.chat([{"role": "user", "content": "again"}])
    return 1.0


def test_each_run_counts_the_requests_served_otherwise_than_asked(endpoint):
    """env/overridden: a run's requests served at the run's values rather than theirs."""
    runs = run_group(endpoint, asks_another_temperature, {"question": "2 + 2?"}, seeds=[1, 2], timeout_s=60)
    assert [run.overridden for run in runs] == [1, 1] and all(run.error is None for run in runs)


def titled(link, row):
    """A title asked aside (not trained), then the answer (trained), then a check that continues the titled
    conversation (trained): its prompt holds the untrained title as context."""
    title = link.chat([{"role": "user", "content": f"A title for: {row['question']}"}], train=False)
    answer = link.chat([{"role": "user", "content": row["question"]}])
    asked = [{"role": "user", "content": f"A title for: {row['question']}"}, title["choices"][0]["message"],
             {"role": "user", "content": "Shorter?"}]
    link.chat(asked)
    return float(bool(answer["choices"]))


def test_a_call_marked_not_trained_is_served_and_recorded_but_in_no_row(endpoint):
    """An auxiliary call (a title, a summary, a judge through the same link) trained with the trajectory's reward
    before; marked not trained, its sampled tokens are never in the loss, and where a later prompt holds them they
    are context there."""
    (run,) = run_group(endpoint, titled, {"question": "2 + 2?"}, seeds=[1], timeout_s=60)
    assert run.error is None and run.turns == 3 and run.untrained == 1
    assert len(run.rows) == 2 and [row.turns for row in run.rows] == [1, 1]
    answer, check = run.rows
    assert all(answer.model_mask) and all(check.model_mask)  # (only what trains is after each prompt)
    assert "A title for" in endpoint.tokenizer.decode(check.prompt_ids)  # (the title: context, not trained)


@pytest.mark.parametrize("how", ["extra_body", "header"])
def test_an_openai_client_marks_its_calls_not_trained(endpoint, how):
    pytest.importorskip("openai")
    from rlvr.harness.group import Link

    rollout = endpoint.open(seed=2)
    link = Link(rollout.base_url, rollout.key)
    client = link.openai(train=how != "header")
    extra = {"extra_body": {"rlvr_train": False}} if how == "extra_body" else {}
    client.chat.completions.create(model="policy", messages=HI, **extra)
    (turn,) = rollout.recorder.turns
    assert turn.trained is False


def test_a_train_mark_that_is_not_a_boolean_is_a_400(endpoint):
    status, answer, _ = chat(endpoint, {"messages": HI, "rlvr_train": "no"})
    assert status == 400 and "rlvr_train='no': give true or false" in answer["error"]["message"]


# ── found by an audit: what a client may send wrong, each a 400 naming it (not a 500, a 404 or a 200) ───────────
@pytest.mark.parametrize(("messages", "said"), [
    ([*HI, {"role": "assistant", "tool_calls": "x"}], "messages[1].tool_calls='x': give a list of"),
    ([*HI, {"role": "assistant", "tool_calls": [{"id": "c1"}]}], "messages[1].tool_calls="),
    ([{"role": "wizard", "content": "Hi"}], "messages[0].role='wizard': give one of system, developer, user"),
    ([{"content": "Hi"}], "messages[0].role=None"),
])
def test_a_malformed_message_is_a_400_naming_it(endpoint, messages, said):
    status, answer, _ = chat(endpoint, {"messages": messages, "max_tokens": 2})
    assert status == 400 and answer["error"]["message"].startswith(said) and not endpoint.failures


@pytest.mark.parametrize(("field", "said"), [
    ({"echo": True}, "echo=true: the endpoint answers with the completion alone"),
    ({"suffix": "zz"}, "suffix: the endpoint cannot fill in the middle"),
    ({"best_of": 3}, "best_of=3: the endpoint returns every completion it draws"),
    ({"logprobs": 5}, "logprobs=5: the endpoint gives each chosen token's log-prob, not the alternatives"),
])
def test_legacy_completion_fields_it_cannot_honour_are_refused(endpoint, field, said):
    rollout = endpoint.open(seed=1)
    status, answer = post(f"{rollout.base_url}/completions", {"prompt": "a", "max_tokens": 2, **field})
    assert status == 400 and answer["error"]["message"].startswith(said)
    assert post(f"{rollout.base_url}/completions", {"prompt": "a", "max_tokens": 2, "logprobs": 1,
                                                    "best_of": 1})[0] == 200


def raw(endpoint, request: bytes) -> bytes:
    """What the endpoint answers to `request`, bytes as sent (a client no HTTP library would let you write)."""
    import socket

    host, port = endpoint.url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request)
        return b"".join(iter(lambda: s.recv(65536), b""))


def test_a_body_that_is_no_json_object_or_a_bad_length_is_a_400_and_other_methods_a_json_405(endpoint):
    base = endpoint.open(seed=1).base_url
    for body, said in (([1, 2], "the body is a list: send a JSON object"), ("hi", "the body is a str: send a JSON "
                                                                                   "object")):
        status, answer = post(f"{base}/chat/completions", body)
        assert status == 400 and answer["error"]["message"] == said
    path = base.split("//")[1].split("/", 1)[1]
    answer = raw(endpoint, f"POST /{path}/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n"
                           "Connection: close\r\n\r\n{}".encode())
    assert answer.startswith(b"HTTP/1.0 400") and b"Content-Length 'abc' is not a number of bytes" in answer
    answer = raw(endpoint, f"DELETE /{path}/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.0 405") and b'"message": "DELETE is not served: POST' in answer
    assert not endpoint.failures


def test_anthropics_x_api_key_header_carries_the_rollout_key(endpoint):
    """The curl form of Anthropic's docs: POST /v1/messages with `x-api-key: KEY` (was a 401)."""
    key = endpoint.open(seed=1).base_url.split("/r/")[1].split("/")[0]
    status, answer = post(f"{endpoint.url}/v1/messages", {"messages": HI, "max_tokens": 2}, headers={"x-api-key": key})
    assert status == 200 and answer["type"] == "message"


def test_messages_refusals_name_messages_fields_and_a_stop_sequence_is_reported(endpoint):
    """Anthropic's stop_reason "stop_sequence" with the string matched (it said end_turn, stop_sequence null);
    a refusal names stop_sequences, not chat's stop; Responses' max_output_tokens, not max_tokens."""
    base = endpoint.open(seed=1).base_url
    status, answer = post(f"{base}/messages", {"messages": HI, "max_tokens": 4, "stop_sequences": "x"})
    assert status == 400 and answer["error"]["message"].startswith("stop_sequences='x': give a list of strings")
    status, answer = post(f"{base}/responses", {"input": "hi", "max_output_tokens": -1})
    assert status == 400 and answer["error"]["message"].startswith("max_output_tokens=-1: give a whole number")
    asked = {"messages": HI, "max_tokens": 12}
    whole = post(f"{endpoint.open(seed=5).base_url}/messages", asked)[1]["content"][0]["text"]
    stop = whole[2:4]  # (the same rollout seed and prompt: the same draw, cut at the string)
    status, answer = post(f"{endpoint.open(seed=5).base_url}/messages", {**asked, "stop_sequences": ["@@@", stop]})
    assert status == 200 and (answer["stop_reason"], answer["stop_sequence"]) == ("stop_sequence", stop)
    assert answer["content"][0]["text"] == whole[:whole.index(stop)]
