"""score_model / label_model against a fake OpenAI-compatible server on loopback (see conftest.py)."""

import re
import socket
import time

import pytest

from rlvr.errors import UserError
from rlvr.rewards import GradeResult
from rlvr.rewards.graders import build_grader, parse_label, parse_score

from .conftest import grade

MESSAGES = [
    {"role": "system", "content": "Grade the answer from 0 to 10."},
    {"role": "user", "content": "Answer: {{ sample.output_text }}\nReference: {{ item.answer }}"},
]


def score_spec(url, **extra):
    return {"type": "score_model", "name": "judge", "model": "tiny-judge", "input": MESSAGES,
            "range": [0, 10], "base_url": url, "backoff_s": 0.01, **extra}


def label_spec(url, **extra):
    return {"type": "label_model", "name": "verdict", "model": "tiny-judge", "input": MESSAGES,
            "labels": ["correct", "incorrect"], "passing_labels": ["correct"], "base_url": url,
            "backoff_s": 0.01, **extra}


def graded_text(body):
    """The completion inside a request the fake judge received ("Answer: <text>" on the first line)."""
    return body["messages"][1]["content"].splitlines()[0].removeprefix("Answer: ")


def free_port():
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_score_model_sends_rendered_messages_and_clamps(fake_judge):
    fake_judge.reply = lambda body: {"4": "Score: 7", "5": "12", "6": "no idea"}[graded_text(body)]
    grader = build_grader(score_spec(fake_judge.url, sampling_params={"temperature": 0.0}))
    results = grade(grader, ["4", "5", "6"], [{"answer": "4"}] * 3)
    assert [r.reward for r in results] == [7.0, 10.0, None]
    assert results[1].reason == "judge score 10 (clamped from 12)"
    assert "no score" in results[2].reason and "'no idea'" in results[2].reason
    # requests run concurrently, so find the one for the first completion rather than the first to arrive
    headers, body = next((h, b) for h, b in fake_judge.requests if graded_text(b) == "4")
    assert body["model"] == "tiny-judge" and body["temperature"] == 0.0
    assert body["messages"][0] == MESSAGES[0]
    assert body["messages"][1]["content"] == "Answer: 4\nReference: 4"
    assert "Authorization" not in headers


def test_score_model_pass_threshold(fake_judge):
    fake_judge.reply = lambda body: "6" if graded_text(body) == "good" else "5.9"
    grader = build_grader(score_spec(fake_judge.url, pass_threshold=6))
    results = grade(grader, ["good", "meh"], [{"answer": "x"}] * 2)
    assert [r.reward for r in results] == [1.0, 0.0]
    assert results[1].reason == "judge score 5.9 < pass_threshold 6"


def test_label_model_maps_replies_to_labels(fake_judge):
    replies = {"a": "Correct.", "b": '{"label": "incorrect"}', "c": "maybe correct, maybe incorrect"}
    fake_judge.reply = lambda body: replies[graded_text(body)]
    grader = build_grader(label_spec(fake_judge.url))
    results = grade(grader, ["a", "b", "c"], [{"answer": "x"}] * 3)
    assert [r.reward for r in results] == [1.0, 0.0, None]
    assert results[0].reason == "judge label 'correct'"
    assert "no single label" in results[2].reason


def test_api_key_is_read_from_the_named_variable(fake_judge, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test-123")
    grade(build_grader(score_spec(fake_judge.url, api_key_env="MY_JUDGE_KEY")), ["x"], [{"answer": "y"}])
    headers, _ = fake_judge.requests[0]
    assert headers["Authorization"] == "Bearer sk-test-123"


def test_base_url_from_environment(fake_judge, monkeypatch):
    monkeypatch.setenv("RLVR_JUDGE_BASE_URL", fake_judge.url)
    spec = score_spec(fake_judge.url)
    del spec["base_url"]
    assert grade(build_grader(spec), ["x"], [{"answer": "y"}])[0].reward == 0.5


def test_two_500s_then_success_is_retried(fake_judge):
    fake_judge.fail_first = 2
    result = grade(build_grader(score_spec(fake_judge.url)), ["x"], [{"answer": "y"}])
    assert result == [GradeResult(0.5, "judge score 0.5")]
    assert len(fake_judge.requests) == 3


def test_429_is_retried(fake_judge):
    fake_judge.fail_first, fake_judge.fail_status = 1, 429
    assert grade(build_grader(score_spec(fake_judge.url)), ["x"], [{"answer": "y"}])[0].reward == 0.5
    assert len(fake_judge.requests) == 2


def test_500_on_every_try_leaves_the_row_unscored(fake_judge):
    fake_judge.fail_first = 100
    result = grade(build_grader(score_spec(fake_judge.url, max_tries=2)), ["x"], [{"answer": "y"}])[0]
    assert result.reward is None
    assert result.reason == "judge failed after 2 tries: HTTP 500 Internal Server Error"
    assert len(fake_judge.requests) == 2


def test_unreachable_judge_is_one_user_error():
    port = free_port()
    grader = build_grader(score_spec(f"http://127.0.0.1:{port}/v1"))
    with pytest.raises(UserError) as error:
        grade(grader, ["x", "y"], [{"answer": "y"}] * 2)
    assert str(error.value) == (
        f"LLM judge at http://127.0.0.1:{port}/v1 unreachable after 3 tries: "
        "connection refused (start the server or fix base_url)"
    )


def test_slow_reply_times_out_and_leaves_the_row_unscored(fake_judge):
    fake_judge.delay_s = 1.0
    grader = build_grader(score_spec(fake_judge.url, timeout_s=0.2, max_tries=2))
    start = time.perf_counter()
    result = grade(grader, ["x"], [{"answer": "y"}])[0]
    assert time.perf_counter() - start < 0.9  # two tries of 0.2 s, not one full 1 s reply
    assert result == GradeResult(None, "judge failed after 2 tries: no reply within timeout_s=0.2")
    assert len(fake_judge.requests) == 2


def test_wrong_route_is_a_user_error(fake_judge):
    grader = build_grader(score_spec(fake_judge.url.removesuffix("/v1")))
    with pytest.raises(UserError, match="answered HTTP 404 Not Found.*check base_url, model"):
        grade(grader, ["x"], [{"answer": "y"}])
    assert len(fake_judge.requests) == 1  # a config mistake is not retried


def test_reply_that_is_not_a_chat_completion(fake_judge):
    fake_judge.raw_body = b'{"unexpected": true}'
    result = grade(build_grader(score_spec(fake_judge.url)), ["x"], [{"answer": "y"}])[0]
    assert result.reward is None and "not a chat completion" in result.reason


def test_row_missing_a_template_field_is_not_sent(fake_judge):
    result = grade(build_grader(score_spec(fake_judge.url)), ["x"], [{"question": "q"}])[0]
    assert result == GradeResult(None, "the row has no field 'answer'")
    assert fake_judge.requests == []


def test_batch_requests_run_concurrently(fake_judge):
    fake_judge.delay_s = 0.5
    grader = build_grader(score_spec(fake_judge.url, concurrency=4))
    start = time.perf_counter()
    results = grade(grader, ["a", "b", "c", "d"], [{"answer": "y"}] * 4)
    assert [r.reward for r in results] == [0.5] * 4
    assert time.perf_counter() - start < 1.5  # one after another would take 2 s


@pytest.mark.parametrize(
    "change, message",
    [
        ({"range": [1, 1]}, "field 'range' must be [low, high] with low < high"),
        ({"range": [0, True]}, "field 'range'"),
        ({"base_url": "127.0.0.1:8000"}, "no http(s) base_url"),
        ({"api_key_env": "RLVR_TEST_UNSET_KEY"}, "$RLVR_TEST_UNSET_KEY, which is not set"),
        ({"input": [{"role": "robot", "content": "hi"}]}, "input message 0 must be"),
        ({"input": "Grade {{ item.answer + 1 }}"}, "is not {{ sample.output_text }}"),
        ({"timeout_s": 0}, "field 'timeout_s' must be above 0"),
        ({"max_tries": "3"}, "field 'max_tries' must be a whole number >= 1"),
        ({"max_tries": 0}, "field 'max_tries' must be a whole number >= 1"),
        ({"concurrency": True}, "field 'concurrency' must be a whole number >= 1"),
        ({"backoff_s": -1}, "field 'backoff_s' must be at least 0"),
        ({"sampling_params": [1]}, "field 'sampling_params' must be a mapping"),
        ({"temperature": 0}, "unknown field 'temperature'"),
    ],
)
def test_score_model_spec_errors(change, message):
    with pytest.raises(UserError, match=re.escape(message)) as error:
        build_grader({**score_spec("http://127.0.0.1:1/v1"), **change})
    assert "\n" not in str(error.value)


def test_missing_base_url_names_the_environment_variable(monkeypatch):
    monkeypatch.delenv("RLVR_JUDGE_BASE_URL", raising=False)
    spec = score_spec("unused")
    del spec["base_url"]
    with pytest.raises(UserError, match="RLVR_JUDGE_BASE_URL"):
        build_grader(spec)


def test_passing_label_must_be_a_label():
    with pytest.raises(UserError, match="passing label 'right' is not in labels"):
        build_grader(label_spec("http://127.0.0.1:1/v1", passing_labels=["right"]))


def test_parse_score_and_label_by_hand():
    assert parse_score('{"score": 0.25}') == 0.25
    assert parse_score("Reasoning: 3 steps were right.\nFinal score = 8/10") == 8.0
    assert parse_score("4.5") == 4.5
    assert parse_score('{"score": true}') is None  # a bool is not a score; no number in the text either
    assert parse_label("**Correct**", ["correct", "incorrect"]) == "correct"
    assert parse_label("The answer is incorrect", ["correct", "incorrect"]) == "incorrect"
    assert parse_label("A", ["A", "B"]) == "A"
    assert parse_label("none of them", ["A", "B"]) is None
