"""rlvr.harness.Endpoint: an OpenAI-compatible server over the Sampler that records exactly what it drew."""

import json
import threading
import urllib.error
import urllib.request

import pytest
import torch

from rlvr.envs.template import chat_prompt_ids
from rlvr.harness import Endpoint
from rlvr.models import build_tiny_model
from rlvr.rollout import SamplingParams
from rlvr.run.policy import Policy
from rlvr.samplers import Job, LocalSampler
from rlvr.seeds import seed_of

PARAMS = SamplingParams(12, temperature=1.0)
HI = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture
def served():
    model, tokenizer = build_tiny_model(seed=0)
    policy = Policy(model, device=torch.device("cpu"), dtype=torch.float32)
    sampler = LocalSampler(policy.decoding, tokenizer, weights=policy.named_weights)
    endpoint = Endpoint(sampler, tokenizer, PARAMS)
    yield endpoint, sampler, tokenizer
    endpoint.close()


def post(url, body, timeout=60, headers=None):
    """(status, JSON answer) of a POST, as any HTTP client would see it."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_chat_completion_is_the_samplers_draw_recorded_exactly(served):
    endpoint, sampler, tokenizer = served
    rollout = endpoint.open(seed=seed_of(3, 1))
    status, answer = post(f"{rollout.base_url}/chat/completions", {"model": "policy", "messages": HI, "n": 2})
    assert status == 200 and answer["object"] == "chat.completion" and len(answer["choices"]) == 2
    prompt = chat_prompt_ids(tokenizer, HI, None)
    assert answer["prompt_token_ids"] == prompt
    turns = rollout.recorder.turns
    assert [t.choice for t in turns] == [0, 1] and turns[0].seed != turns[1].seed
    expected = sampler.complete([Job(prompt, t.seed, PARAMS.max_new_tokens) for t in turns], PARAMS)
    for choice, turn, drawn in zip(answer["choices"], turns, expected):
        assert choice["token_ids"] == turn.token_ids == drawn.token_ids
        assert turn.prompt_ids == prompt and turn.logprobs == drawn.logprobs
        assert [c["logprob"] for c in choice["logprobs"]["content"]] == drawn.logprobs
        assert choice["message"] == {"role": "assistant",
                                     "content": tokenizer.decode(drawn.token_ids, skip_special_tokens=True)}
        assert choice["finish_reason"] == ("stop" if drawn.stopped else "length")
    assert answer["usage"]["completion_tokens"] == sum(len(t.token_ids) for t in turns)


def test_what_is_drawn_depends_on_the_rollout_seed_and_the_prompt_not_on_the_order_of_calls(served):
    """Request k of a rollout with the same prompt ids draws anew; concurrent rollouts draw what they draw alone."""
    endpoint, _, _ = served
    ask = {"messages": HI}

    def ids(rollout, body=ask):
        return post(f"{rollout.base_url}/chat/completions", body)[1]["choices"][0]["token_ids"]

    first = endpoint.open(seed=11)
    a, b = ids(first), ids(first)
    assert a != b  # (the second request with these ids is request k = 1: another seed)
    again = endpoint.open(seed=11)
    threads, got = [], {}
    for name, seed in [("same", 11), ("other", 12)]:
        rollout = again if name == "same" else endpoint.open(seed=seed)
        threads.append(threading.Thread(target=lambda n=name, r=rollout: got.setdefault(n, ids(r))))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert got["same"] == a and got["other"] != a


def test_a_text_completion_and_the_model_list(served):
    endpoint, _, tokenizer = served
    rollout = endpoint.open(seed=5)
    status, answer = post(f"{rollout.base_url}/completions", {"prompt": "2 + 2 =", "max_tokens": 4})
    assert status == 200 and answer["object"] == "text_completion"
    assert answer["prompt_token_ids"] == tokenizer("2 + 2 =", add_special_tokens=False).input_ids
    assert len(answer["choices"][0]["token_ids"]) <= 4 and isinstance(answer["choices"][0]["text"], str)
    with urllib.request.urlopen(f"{rollout.base_url}/models", timeout=30) as response:
        assert json.loads(response.read())["data"][0]["id"] == "policy"


@pytest.mark.parametrize("body, status, message", [
    ({"messages": HI, "max_tokens": 0}, 400, "max_tokens=0: give a whole number of tokens, 1 or more"),
    ({"messages": HI, "n": 0}, 400, "n=0: ask for 1 to 16 choices"),
    ({"messages": []}, 400, "messages must be a non-empty list"),
    ({"messages": [{"role": "user", "content": HI}]}, 400, "messages[0].content is list"),  # (a row's messages)
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}, 200, None),  # (content parts)
    ({"messages": HI, "temperature": 1.0, "seed": 7}, 200, None),  # (the run's own values, and a seed ignored)
])
def test_requests_the_run_cannot_serve_are_refused_naming_the_cause(served, body, status, message):
    endpoint, _, _ = served
    rollout = endpoint.open(seed=1)
    got, answer = post(f"{rollout.base_url}/chat/completions", body)
    assert got == status
    if message:
        assert message in answer["error"]["message"]
    assert len(rollout.recorder.turns) == (1 if status == 200 else 0)  # a refused request records nothing


def test_unknown_and_finished_rollouts_are_refused(served):
    endpoint, _, _ = served
    rollout = endpoint.open(seed=1)
    assert post(f"{rollout.base_url}/chat/completions", {"messages": HI})[0] == 200
    turns = endpoint.finish(rollout.key)
    assert len(turns) == 1
    status, answer = post(f"{rollout.base_url}/chat/completions", {"messages": HI})
    assert status == 410 and "finished" in answer["error"]["message"]
    assert len(rollout.recorder.turns) == 1  # (the late call recorded nothing)
    assert post(f"{endpoint.url}/r/nokey/v1/chat/completions", {"messages": HI})[0] == 401
    assert post(f"{rollout.base_url}/embeddings", {"input": "x"})[0] == 404


def test_a_retry_gets_the_same_answer_and_a_stream_the_same_draw_as_events(served):
    """The openai SDK resends a request it thinks was lost (x-stainless-retry-count): that is not a new draw; a
    streamed request is answered as server-sent events holding what the plain answer holds."""
    endpoint, _, _ = served
    rollout = endpoint.open(seed=21)
    body = {"messages": HI, "n": 2}
    _, first = post(f"{rollout.base_url}/chat/completions", body)
    _, retried = post(f"{rollout.base_url}/chat/completions", body, headers={"x-stainless-retry-count": "1"})
    assert retried == first and len(rollout.recorder.turns) == 2  # (recorded once)
    _, again = post(f"{rollout.base_url}/chat/completions", body)  # (not a retry: request k = 1, a new draw)
    assert again["choices"][0]["token_ids"] != first["choices"][0]["token_ids"] and len(rollout.recorder.turns) == 4

    streamed = endpoint.open(seed=21)
    request = urllib.request.Request(f"{streamed.base_url}/chat/completions", method="POST",
                                     data=json.dumps({**body, "stream": True}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        lines = [line for line in response.read().decode().split("\n") if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert {e["object"] for e in events} == {"chat.completion.chunk"}
    for i, choice in enumerate(first["choices"]):  # (the same seed: the same draws as the plain answer)
        mine = [e["choices"][0] for e in events if e["choices"][0]["index"] == i]
        assert mine[0]["delta"]["content"] == choice["message"]["content"]
        assert mine[-1]["finish_reason"] == choice["finish_reason"]


def test_a_client_gone_before_its_answer_was_written_trains_on_nothing(served, monkeypatch):
    """A turn counts once its answer reached the agent whole: if the connection breaks while it is written, the
    draws were never seen, and the rollout records nothing of them."""
    from rlvr.harness import endpoint as module

    endpoint, _, _ = served
    rollout = endpoint.open(seed=2)
    real = module._Handler._write

    def broken(self, status, text, kind):
        raise BrokenPipeError("the client closed the connection")

    monkeypatch.setattr(module._Handler, "_write", broken)
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        post(f"{rollout.base_url}/chat/completions", {"messages": HI}, timeout=30)
    assert rollout.recorder.turns == [] and rollout.recorder.answers == {}
    monkeypatch.setattr(module._Handler, "_write", real)
    assert post(f"{rollout.base_url}/chat/completions", {"messages": HI})[0] == 200
    assert len(rollout.recorder.turns) == 1


def test_an_agent_that_floods_its_rollout_is_refused_past_the_limit(monkeypatch):
    """Requests of one rollout answered at once are capped (429 naming the cause); other rollouts are not held up."""
    import time

    from rlvr.harness import endpoint as module
    from rlvr.samplers import Sampled

    class Slow:
        def complete(self, jobs, params):
            time.sleep(2)  # (long enough that the four requests overlap, however loaded the machine)
            return [Sampled([2], [-0.1], True) for _ in jobs]

    monkeypatch.setattr(module, "MAX_IN_FLIGHT", 2)
    tokenizer = build_tiny_model(seed=0)[1]
    endpoint = Endpoint(Slow(), tokenizer, PARAMS)
    try:
        flooding, other = endpoint.open(seed=1), endpoint.open(seed=2)
        statuses, threads = [], []
        for i in range(4):
            body = {"messages": [{"role": "user", "content": f"q{i}"}]}
            threads.append(threading.Thread(
                target=lambda b=body: statuses.append(post(f"{flooding.base_url}/chat/completions", b))))
        for thread in threads:
            thread.start()
            time.sleep(0.05)
        assert post(f"{other.base_url}/chat/completions", {"messages": HI})[0] == 200
        for thread in threads:
            thread.join(timeout=30)
        codes = sorted(code for code, _ in statuses)
        assert codes == [200, 200, 429, 429]
        refused = next(answer for code, answer in statuses if code == 429)
        assert "more than 2 requests of this rollout at once" in refused["error"]["message"]
        assert len(flooding.recorder.turns) == 2
    finally:
        endpoint.close()


def test_a_conversation_sent_as_content_parts_continues_its_turn_as_one_written_as_text(served, monkeypatch):
    """An agent whose messages are OpenAI content parts: its second request extends the first turn's ids (never
    rendered again), as the same conversation written as plain text does."""
    import rlvr.harness.endpoint as module

    endpoint, _, _ = served
    spliced = []
    real = module.spliced_prompt
    monkeypatch.setattr(module, "spliced_prompt", lambda *a: spliced.append(real(*a) is not None) or real(*a))
    prompts = []
    for parts in (False, True):
        rollout = endpoint.open(seed=seed_of(4, 1))
        text = (lambda t: [{"type": "text", "text": t}]) if parts else (lambda t: t)
        messages = [{"role": "user", "content": text("What is 2 + 2?")}]
        _, first = post(f"{rollout.base_url}/chat/completions", {"model": "policy", "messages": messages})
        said = first["choices"][0]["message"]["content"]
        messages += [{"role": "assistant", "content": text(said)}, {"role": "user", "content": text("Sure?")}]
        _, second = post(f"{rollout.base_url}/chat/completions", {"model": "policy", "messages": messages})
        turns = rollout.recorder.turns
        assert second["prompt_token_ids"][:len(turns[0].prompt_ids) + len(turns[0].token_ids)] == \
            turns[0].prompt_ids + turns[0].token_ids  # (continued, not rendered again)
        prompts.append(second["prompt_token_ids"])
    assert prompts[0] == prompts[1]
    assert spliced == [False, True, False, True]  # (each second request continued its first turn)
