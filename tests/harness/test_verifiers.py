"""verifiers environments trained unchanged (`environment.name: verifiers:...`): a SingleTurnEnv scored by its
weighted rubric with a group reward, a MultiTurnEnv game, a ToolEnv whose tool runs; the environment's own
dataset; resume; the rubric's failures are not scores; the tokens verifiers sees are the ones rlvr trains."""

import copy
import json
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("verifiers")
pytest.importorskip("openai")

from rlvr.adapters import verifiers_env
from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo
from rlvr.harness import Endpoint
from rlvr.harness.group import run_group
from rlvr.models import build_tiny_model
from rlvr.rollout import SamplingParams
from rlvr.run.policy import Policy
from rlvr.samplers import LocalSampler

from ..train.resumed import assert_resumes_exactly
from ..train.test_step import tiny_config
from . import vf_envs

ENVS = Path(__file__).with_name("vf_envs.py")


def settings(kind, *extra):
    return [f"environment.name=verifiers:{ENVS}?kind={kind}", "generation.max_new_tokens=6", "eval_before=false",
            "eval_after=false", "sample_every=1", *extra]


def lines(run, name):
    return [json.loads(x) for x in (run / name).read_text().splitlines()]


def test_a_single_turn_env_trains_on_its_own_dataset_scored_by_its_weighted_rubric(tmp_path):
    train_grpo(tiny_config(tmp_path, *settings("single")))
    run = tmp_path / "run"
    groups = lines(run, "samples.jsonl")
    questions = {q["question"] for q in vf_envs.QUESTIONS}
    # the environment's rows, not arithmetic's (the prompt as verifiers sent it, through the chat template)
    assert all(sum(q in g["prompt"] for q in questions) == 1 for g in groups)
    for g in groups:  # correct + 0.5 · length + 0.25 · shortest of the group: verifiers' rubric, as weighted
        answer = next(q["answer"] for q in vf_envs.QUESTIONS if q["question"] in g["prompt"])
        completions = [[{"role": "assistant", "content": c}] for c in g["completions"]]
        shortest = vf_envs.shortest_in_group(completions)
        expected = [vf_envs.correct(c, answer) + 0.5 * vf_envs.length(c) + 0.25 * s
                    for c, s in zip(completions, shortest)]
        assert g["rewards"] == pytest.approx(expected, abs=1e-5)
    metrics = lines(run, "metrics.jsonl")
    assert len(metrics) == 2 and all("env/shortest_in_group" in m and m["env/errors"] == 0 for m in metrics)


@pytest.mark.parametrize("kind", ["single", "game", "tool"])
def test_a_verifiers_run_resumes_exactly_and_evaluates(tmp_path, kind, request):
    from rlvr.cli import main

    if kind == "tool":
        request.getfixturevalue("calls_the_tool")
    assert_resumes_exactly(tmp_path, *settings(kind))
    source = f"verifiers:{ENVS}?kind={kind}"
    assert main(["eval", "--model", "tiny", "--data", source, "--limit", "2", "--samples", "2", "--max-new-tokens",
                 "6", "--set", f"environment.name={source}", "--output-dir", str(tmp_path / "e")]) == 0


def test_a_multi_turn_game_trains_its_conversations_as_one_row_each(tmp_path):
    train_grpo(tiny_config(tmp_path, *settings("game")))
    metrics = lines(tmp_path / "run", "metrics.jsonl")
    assert all(m["env/num_turns"] >= 1 and m["env/rows"] == 1 and m["env/turns"] == m["env/num_turns"]
               for m in metrics)
    transcript = lines(tmp_path / "run", "samples.jsonl")[0]["transcripts"][0][1]["content"]
    assert "longer" in transcript or "good" in transcript  # (the environment's own answers, as context)


def test_a_tool_env_runs_every_call_and_trains(tmp_path, calls_the_tool):
    train_grpo(tiny_config(tmp_path, *settings("tool")))
    metrics = lines(tmp_path / "run", "metrics.jsonl")
    assert all(m["env/add_calls"] >= 1 and m["env/total_tool_calls"] >= 1 for m in metrics)
    transcript = lines(tmp_path / "run", "samples.jsonl")[0]["transcripts"][0][1]["content"]
    assert "<tool_call>" in transcript and "5" in transcript.split("</tool_call>", 1)[1]  # the tool's answer: context


def test_a_reward_function_that_raises_is_not_a_score(tmp_path):
    with pytest.raises(UserError, match=r"reward function broken raised ValueError: the rubric's own bug"):
        train_grpo(tiny_config(tmp_path, *settings("single"), "environment.params.raise_in_rubric=true"))


def test_a_group_reward_of_the_wrong_length_is_one_line_not_a_traceback(tmp_path):
    """verifiers' guard catches a reward function's exception, not score_group's own on the list it returned."""
    with pytest.raises(UserError, match=r"its rubric's score_group raised IndexError: .* \(the group is unscored\)"):
        train_grpo(tiny_config(tmp_path / "a", *settings("single"), "environment.params.short_group=true"))


def test_what_verifiers_reads_back_is_what_rlvr_recorded():
    model, tokenizer = build_tiny_model(seed=0)
    policy = Policy(model, device=torch.device("cpu"), dtype=torch.float32)
    endpoint = Endpoint(LocalSampler(policy.decoding, tokenizer, weights=policy.named_weights), tokenizer,
                        SamplingParams(6, temperature=1.0))
    states = []
    agent = verifiers_env.VerifiersAgent(verifiers_env.load(f"verifiers:{ENVS}?kind=game"), "game")
    real = agent.run

    def run(link, row):
        state = real(link, row)
        states.append(state)  # (in the order the runs end, which is not the order of their seeds)
        return state

    agent.run = run
    try:
        row = verifiers_env.rows(agent.env, "train")[0]
        rollouts = run_group(endpoint, agent, row, seeds=[1, 2], timeout_s=60)
    finally:
        endpoint.close()
    assert len(states) == len(rollouts) == 2
    trained = [[t for s in r.rows for t, m in zip(s.ids, s.model_mask) if m] for r in rollouts]
    for state in states:  # each run's state is the rollout whose trained tokens are the ones it read back
        steps = state["trajectory"]
        sampled = [t for step in steps for t in step["tokens"]["completion_ids"]]
        assert sampled in trained
        rollout = rollouts[trained.index(sampled)]
        assert rollout.turns == len(steps) >= 1 and rollout.error is None
        assert rollout.reward == pytest.approx(state["reward"])


def test_mistakes_naming_a_verifiers_environment_are_one_line(tmp_path):
    with pytest.raises(UserError, match=r"loading it raised ValueError: unknown kind 'nope'"):
        train_grpo(tiny_config(tmp_path / "a", *settings("nope")))
    with pytest.raises(UserError, match="environment 'verifiers:no_such_env_module': loading it raised .*installed"):
        train_grpo(tiny_config(tmp_path / "b", "environment.name=verifiers:no_such_env_module"))


def test_rlvr_eval_judges_each_run_by_the_rubric(tmp_path):
    from rlvr.cli import main
    from rlvr.evaluate.store import EvalStore

    source = f"verifiers:{ENVS}?kind=digit"
    assert main(["eval", "--model", "tiny", "--data", source, "--limit", "4", "--samples", "2", "--max-new-tokens",
                 "8", "--set", f"environment.name={source}", "--output-dir", str(tmp_path / "e")]) == 0
    judged = [s for r in EvalStore(tmp_path / "e").read() for s in [r.greedy, *r.samples]]
    assert len(judged) == 12  # right where the rubric's reward (a digit written: 1, else 0) reaches 0.5
    assert all(s.correct["strict"] == float(any(c.isdigit() for c in s.text)) for s in judged)
    assert {s.correct["strict"] for s in judged} == {0.0, 1.0}


def test_loading_an_environment_leaves_the_processs_signal_handlers_as_they_were():
    """A verifiers Environment sets Ctrl-C and SIGTERM handlers when it is built (SIGTERM then exits at once):
    rlvr's stop-and-save must stay what a signal does."""
    import signal

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    verifiers_env.load(f"verifiers:{ENVS}?kind=single&rows=3")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_verifiers_0_4_which_has_only_its_v1_api_is_refused_in_one_line(tmp_path, monkeypatch):
    """verifiers 0.4.0's package root holds `__version__` and the `v1` subpackage, nothing of the classic API."""
    import types

    v04 = types.ModuleType("verifiers")
    v04.__version__ = "0.4.0"
    monkeypatch.setitem(sys.modules, "verifiers", v04)
    with pytest.raises(UserError, match=r"^verifiers 0\.4\.0 is installed, whose v1 Taskset/Harness API rlvr does "
                                        r"not train .*: pip install 'verifiers==0\.3\.1'$"):
        train_grpo(tiny_config(tmp_path, *settings("single")))


def test_another_classic_version_is_named_once_and_used(monkeypatch, capsys):
    import verifiers

    monkeypatch.setattr(verifiers, "__version__", "0.3.2")
    monkeypatch.setattr(verifiers_env, "_said", set())
    for _ in range(2):
        assert isinstance(verifiers_env.load(f"verifiers:{ENVS}?kind=single&rows=3"), verifiers.Environment)
    said = [line for line in capsys.readouterr().err.splitlines() if "rlvr" in line]  # (datasets' bars aside)
    assert said == ["rlvr: verifiers 0.3.2 is installed; rlvr supports verifiers 0.3.1 (its classic Environment "
                    "API): if something fails, pip install 'verifiers==0.3.1'"]


@pytest.fixture
def judge_url():
    """An OpenAI-compatible judge on loopback that always answers "yes" (HTTP/1.1: the client keeps its
    connections, as a real judge's does)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Judge(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"id": "j", "object": "chat.completion", "created": 0, "model": "judge", "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "yes"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_judge_rubrics_one_client_scores_every_group_of_every_step(tmp_path, judge_url):
    """A JudgeRubric's AsyncOpenAI client, shared by every rollout, belongs to the event loop it was first used
    on: rollouts and rubrics each on an event loop of their own would fail from the second group on."""
    train_grpo(tiny_config(tmp_path, f"environment.name=verifiers:{ENVS}?kind=judge&rows=4&judge={judge_url}",
                           "generation.max_new_tokens=6", "eval_before=false", "eval_after=false", "sample_every=1"))
    run = tmp_path / "run"
    assert [m["env/errors"] for m in lines(run, "metrics.jsonl")] == [0, 0]
    assert all(g["rewards"] == [1.0] * len(g["rewards"]) for g in lines(run, "samples.jsonl"))


@pytest.mark.parametrize(("sampling_args", "served"), [
    ({"temperature": 0.3, "max_tokens": 50, "extra_body": {"skip_special_tokens": False}}, True),
    ({"response_format": {"type": "json_object"}}, False),
])
def test_the_environments_own_sampling_args_are_held_to_the_endpoints_rule(sampling_args, served, capsys):
    """verifiers' generate() passes the environment's sampling_args to each rollout (they were dropped: {}): a
    temperature or budget of its own is served at the run's values, counted and said; JSON mode is refused."""
    model, tokenizer = build_tiny_model(seed=0)
    policy = Policy(model, device=torch.device("cpu"), dtype=torch.float32)
    endpoint = Endpoint(LocalSampler(policy.decoding, tokenizer, weights=policy.named_weights), tokenizer,
                        SamplingParams(6, temperature=1.0))
    # (a copy of the environment rlvr loads: loading one by hand would leave verifiers' SIGINT handler behind)
    env = copy.copy(verifiers_env.load(f"verifiers:{ENVS}?kind=digit"))
    env.sampling_args = {**env.sampling_args, **sampling_args}
    agent = verifiers_env.VerifiersAgent(env, "digit")
    try:
        rollouts = run_group(endpoint, agent, verifiers_env.rows(env, "train")[0], seeds=[1, 2], timeout_s=60)
    finally:
        endpoint.close()
    if served:
        assert [r.overridden for r in rollouts] == [1, 1] and all(r.error is None for r in rollouts)
        err = capsys.readouterr().err
        assert "an agent asked temperature=0.3" in err and "tokens=50: served at the run's value" in err
    else:
        assert all("response_format" in (r.error or "") for r in rollouts)
