"""rlvr.envs.template: the model's tool calls as OpenAI tool_calls, and tool-call histories rendered once."""

import json

import pytest

from rlvr.envs.template import chat_prompt_ids, reply
from rlvr.harness import Endpoint
from rlvr.models import build_tiny_model
from rlvr.rollout import SamplingParams
from rlvr.samplers import Sampled

TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {
    "a": {"type": "integer"}, "b": {"type": "integer"}}}}}]


@pytest.fixture
def tokenizer():
    return build_tiny_model(seed=0)[1]


def test_every_call_of_a_message_is_read_outside_its_thinking(tokenizer):
    text = ('<think>maybe <tool_call>{"name": "add", "arguments": {"a": 0, "b": 0}}</tool_call></think>'
            'Adding. <tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>\n'
            '<tool_call>{"name": "add", "arguments": {"a": 4, "b": 5}}</tool_call>')
    got = reply(tokenizer, text, TOOLS)
    assert [(c["type"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in got.tool_calls] == [
        ("function", "add", {"a": 2, "b": 3}), ("function", "add", {"a": 4, "b": 5})]
    assert len({c["id"] for c in got.tool_calls}) == 2 and got.unreadable == 0
    assert got.content.startswith("<think>") and got.content.endswith("Adding.")  # (the calls taken out)


def test_an_unreadable_call_stays_text_and_is_counted_and_no_tools_means_no_calls(tokenizer):
    broken = 'I will <tool_call>{"name": "add", "arguments": {"a": 2,</tool_call>'
    got = reply(tokenizer, broken, TOOLS)
    assert got.tool_calls == [] and got.unreadable == 1 and got.content == broken
    assert reply(tokenizer, '<tool_call>{"arguments": {}}</tool_call>', TOOLS).unreadable == 1  # (no name)
    plain = '<tool_call>{"name": "add", "arguments": {}}</tool_call>'
    assert reply(tokenizer, plain, None).message() == {"role": "assistant", "content": plain}


def test_string_arguments_in_the_history_are_rendered_as_the_mapping_they_encode(tokenizer):
    """OpenAI sends a call's arguments as a JSON string; a template that `tojson`s them would encode them twice."""
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] or '' }}"
        "{% for c in m.get('tool_calls') or [] %}"
        "[{{ c['function']['name'] }} {{ c['function']['arguments'] | tojson }}]"
        "{% endfor %}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}
    as_sent = {**call, "function": {**call["function"], "arguments": json.dumps({"a": 2, "b": 3})}}
    history = [{"role": "user", "content": "2+3?"}, {"role": "assistant", "content": "", "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "call_1", "content": "5"}]
    sent = [history[0], {**history[1], "tool_calls": [as_sent]}, history[2]]
    assert chat_prompt_ids(tokenizer, sent, TOOLS) == chat_prompt_ids(tokenizer, history, TOOLS)
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == '{"a": 2, "b": 3}'  # (the request left as it was)


class Scripted:
    """A sampler that answers every job with the same text (and its end token)."""

    def __init__(self, tokenizer, text):
        self.ids = [*tokenizer(text, add_special_tokens=False).input_ids, tokenizer.eos_token_id]

    def complete(self, jobs, params):
        return [Sampled(self.ids, [-0.5] * len(self.ids), True) for _ in jobs]


def test_the_endpoint_answers_a_call_with_tool_calls(tokenizer):
    from .test_endpoint import post

    text = 'Sure. <tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    endpoint = Endpoint(Scripted(tokenizer, text), tokenizer, SamplingParams(200, temperature=1.0))
    try:
        rollout = endpoint.open(seed=1)
        status, answer = post(f"{rollout.base_url}/chat/completions",
                              {"messages": [{"role": "user", "content": "2+3?"}], "tools": TOOLS})
        assert status == 200
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "Sure."
        assert choice["message"]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
        assert rollout.recorder.turns[0].token_ids == Scripted(tokenizer, text).ids  # (every sampled id kept)
        status, answer = post(f"{rollout.base_url}/chat/completions",
                              {"messages": [{"role": "user", "content": "2+3?"}]})  # no tools offered: text
        assert answer["choices"][0]["finish_reason"] == "stop" and "tool_calls" not in answer["choices"][0]["message"]
    finally:
        endpoint.close()


class Turns:
    """A sampler that answers the k-th job it is given with the k-th of some scripted id lists."""

    def __init__(self, answers):
        self.answers = list(answers)

    def complete(self, jobs, params):
        return [Sampled(ids, [-0.25] * len(ids), ids[-1] == 2) for ids in (self.answers.pop(0) for _ in jobs)]


def test_a_continued_conversation_keeps_the_sampled_ids_where_rendering_again_would_not(tokenizer):
    """The next request repeats the served message: its prompt is the turn's prompt and sampled ids verbatim,
    then the tool result bridged; the chat template rendering the whole conversation again would lose what the
    model sampled (here a special token inside its message, which the message's text cannot carry)."""
    from .test_endpoint import post

    encode = lambda text: tokenizer(text, add_special_tokens=False).input_ids  # noqa: E731
    first = [*encode("Let me add."), tokenizer.unk_token_id,
             *encode(' <tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'), tokenizer.eos_token_id]
    second = [*encode("It is 5."), tokenizer.eos_token_id]
    endpoint = Endpoint(Turns([first, second, second]), tokenizer, SamplingParams(200, temperature=1.0))
    try:
        rollout = endpoint.open(seed=1)
        asked = [{"role": "user", "content": "2+3?"}]
        _, answer = post(f"{rollout.base_url}/chat/completions", {"messages": asked, "tools": TOOLS})
        served = {**answer["choices"][0]["message"], "reasoning_content": None}  # (echoed as agents do)
        call = served["tool_calls"][0]
        conversation = [*asked, served, {"role": "tool", "tool_call_id": call["id"], "content": "5"}]
        post(f"{rollout.base_url}/chat/completions", {"messages": conversation, "tools": TOOLS})
        one, two = rollout.recorder.turns
        assert one.token_ids == first and two.token_ids == second
        assert two.prompt_ids[:len(one.prompt_ids) + len(first)] == one.prompt_ids + first  # (spliced, verbatim)
        assert chat_prompt_ids(tokenizer, conversation, TOOLS) != two.prompt_ids  # (what rendering again gives)
        rewritten = [asked[0], {"role": "assistant", "content": "I added."}, conversation[2]]
        post(f"{rollout.base_url}/chat/completions", {"messages": rewritten, "tools": TOOLS})
        assert rollout.recorder.turns[2].prompt_ids == chat_prompt_ids(tokenizer, rewritten, TOOLS)  # (a new segment)
    finally:
        endpoint.close()


@pytest.mark.parametrize("text, calls, content, unreadable", [
    ('[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "add", "arguments": {"a": 3, "b": 4}}]',
     [{"a": 1, "b": 2}, {"a": 3, "b": 4}], "", 0),  # Mistral
    ('Adding. [TOOL_CALLS][{"name": "add", "arguments": {"a": 1', [], None, 1),  # Mistral, cut
    ('<|python_tag|>{"name": "add", "parameters": {"a": 5, "b": 6}}', [{"a": 5, "b": 6}], "", 0),  # Llama 3
    ('{"name": "add", "parameters": {"a": 1, "b": 1}}; {"name": "add", "parameters": {"a": 2, "b": 2}}',
     [{"a": 1, "b": 1}, {"a": 2, "b": 2}], "", 0),  # Llama 3, two calls
    ('{"name": "add", "parameters": {"a": 1, "note": "x; y"}}; {"name": "add", "parameters": {"a": 2}};',
     [{"a": 1, "note": "x; y"}, {"a": 2}], "", 0),  # Llama 3, a ';' inside an argument
    ('{"answer": 5}', [], None, 0),  # JSON that is no call: text
])
def test_the_other_common_call_forms_are_read(tokenizer, text, calls, content, unreadable):
    got = reply(tokenizer, text, TOOLS)
    assert [json.loads(c["function"]["arguments"]) for c in got.tool_calls] == calls
    assert got.content == (text if content is None else content) and got.unreadable == unreadable
    assert all(c["function"]["name"] == "add" for c in got.tool_calls)


def test_a_stop_string_ends_the_answer_and_the_record_where_it_completes(tokenizer):
    from .test_endpoint import post

    endpoint = Endpoint(Scripted(tokenizer, "Hello STOP world"), tokenizer, SamplingParams(200, temperature=1.0))
    try:
        rollout = endpoint.open(seed=1)
        ask = [{"role": "user", "content": "hi"}]
        status, answer = post(f"{rollout.base_url}/chat/completions", {"messages": ask, "stop": ["STOP", "zzz"]})
        choice = answer["choices"][0]
        assert status == 200 and choice["message"]["content"] == "Hello " and choice["finish_reason"] == "stop"
        turn = rollout.recorder.turns[0]
        kept = tokenizer.decode(turn.token_ids)
        assert kept == "Hello STOP" and not turn.closed  # (no token after the one completing the stop string)
        assert choice["token_ids"] == turn.token_ids and len(choice["logprobs"]["content"]) == len(turn.token_ids)
        # the next turn continues the cut one: its ids verbatim, closed by the template's end marker as context
        post(f"{rollout.base_url}/chat/completions",
             {"messages": [*ask, choice["message"], {"role": "user", "content": "go on"}]})
        second = rollout.recorder.turns[1]
        assert second.prompt_ids[:len(turn.prompt_ids) + len(turn.token_ids)] == turn.prompt_ids + turn.token_ids
        assert tokenizer.decode(second.prompt_ids[len(turn.prompt_ids) + len(turn.token_ids):]).startswith(
            "<|im_end|>")
        status, answer = post(f"{rollout.base_url}/chat/completions", {"messages": ask, "stop": [""]})
        assert status == 400 and "stop=['']" in answer["error"]["message"]
    finally:
        endpoint.close()


def test_a_call_marker_that_is_a_special_token_is_read_though_decoding_skips_special_tokens(tokenizer):
    """Mistral's [TOOL_CALLS] is a special token of its vocabulary: the sampled call after it is still a call, and
    the end of turn is still left out of the text."""
    from rlvr.envs.template import completion_text

    tokenizer.add_special_tokens({"additional_special_tokens": ["[TOOL_CALLS]"]})
    marker = tokenizer.convert_tokens_to_ids("[TOOL_CALLS]")
    call = '[{"name": "add", "arguments": {"a": 1, "b": 2}}]'
    ids = [marker, *tokenizer(call, add_special_tokens=False).input_ids, tokenizer.eos_token_id]
    assert tokenizer.decode(ids, skip_special_tokens=True) == call  # (the marker gone: no call to read)
    text = completion_text(tokenizer, ids)
    assert text == "[TOOL_CALLS]" + call
    assert [json.loads(c["function"]["arguments"]) for c in reply(tokenizer, text, TOOLS).tool_calls] == [
        {"a": 1, "b": 2}]


@pytest.mark.parametrize("before", ["", "a", "Some words come first, then ", "x" * 300 + " "])
def test_a_draw_is_cut_at_the_first_token_that_completes_a_stop_string(tokenizer, before):
    from rlvr.harness.stops import at_stop

    ids = tokenizer(before + "DONE and more text after DONE", add_special_tokens=False).input_ids
    cut, text, matched = at_stop(tokenizer, Sampled(ids, [-0.5] * len(ids), False), ["zzz", "DONE"])
    assert matched == "DONE"
    k = len(cut.token_ids)
    assert "DONE" in tokenizer.decode(ids[:k]) and "DONE" not in tokenizer.decode(ids[:k - 1])
    assert cut.logprobs == [-0.5] * k and cut.stopped and text == before


def _continued(api, text):
    """(first request, the request continuing it with the served answer `text` echoed) in `api`'s own form."""
    ask, more = "2+3?", "Sure?"
    if api == "chat/completions":
        return ({"messages": [{"role": "user", "content": ask}]},
                {"messages": [{"role": "user", "content": ask}, {"role": "assistant", "content": text},
                              {"role": "user", "content": more}]})
    if api == "responses":
        return ({"input": ask}, {"input": [{"role": "user", "content": ask},
                                           {"type": "message", "role": "assistant",
                                            "content": [{"type": "output_text", "text": text}]},
                                           {"role": "user", "content": more}]})
    return ({"max_tokens": 50, "messages": [{"role": "user", "content": ask}]},
            {"max_tokens": 50, "messages": [{"role": "user", "content": ask},
                                            {"role": "assistant", "content": [{"type": "text", "text": text}]},
                                            {"role": "user", "content": more}]})


@pytest.mark.parametrize("api", ["chat/completions", "responses", "messages"])
def test_a_non_canonical_draw_stays_as_drawn_in_the_next_prompt_whatever_the_api(tokenizer, api):
    """The model drew `<|im_end|>` one character at a time inside its message (ids its text re-encodes to one
    special token): the next request's prompt holds those ids as drawn, in every API the endpoint speaks. A splice
    that re-tokenised the model's own text would pass the other tests and fail here."""
    from .test_endpoint import post

    encode = lambda text: tokenizer(text, add_special_tokens=False).input_ids  # noqa: E731
    chars = [i for c in "<|im_end|>" for i in encode(c)]
    first = [*encode("It is "), *chars, *encode(" 5."), tokenizer.eos_token_id]
    assert tokenizer(tokenizer.decode(first), add_special_tokens=False).input_ids != first  # (non-canonical)
    endpoint = Endpoint(Turns([first, [*encode("Yes."), tokenizer.eos_token_id]]), tokenizer,
                        SamplingParams(200, temperature=1.0))
    try:
        rollout = endpoint.open(seed=1)
        start, _ = _continued(api, "")
        status, answer = post(f"{rollout.base_url}/{api}", start)
        text = {"chat/completions": lambda a: a["choices"][0]["message"]["content"],
                "responses": lambda a: a["output"][0]["content"][0]["text"],
                "messages": lambda a: a["content"][0]["text"]}[api](answer)
        assert status == 200 and "<|im_end|>" in text
        status, _ = post(f"{rollout.base_url}/{api}", _continued(api, text)[1])
        one, two = rollout.recorder.turns
        assert status == 200 and one.token_ids == first
        assert two.prompt_ids[:len(one.prompt_ids) + len(first)] == one.prompt_ids + first  # (as drawn)
    finally:
        endpoint.close()
