"""Multi-turn rollouts: the transcript token by token (model tokens under the mask, the template's
markers and the environment's messages outside it), the turn and token limits, tool calls that end a
message, and the sampled log-probs of model tokens equal to one forward over the whole transcript."""

import time

import pytest
import torch

from rlvr.envs import Reply
from rlvr.envs import rollout as conv
from rlvr.envs.guess import GuessNumber
from rlvr.logprobs import completion_logprobs
from rlvr.rollout import SamplingParams
from rlvr.seeds import seed_of

ASK = [{"role": "user", "content": "Guess."}]


class Scripted:
    """An environment that answers each message from a list, then ends the trajectory."""

    def __init__(self, replies, keep=None):
        self.replies, self.keep, self.seen = list(replies), keep, []

    def reset(self, row, messages, seed):
        return messages

    def step(self, text):
        self.seen.append(text)
        if not self.replies:
            return Reply(message=None, done=True, reward=1.0)
        keep = self.keep(text) if self.keep else None
        return Reply(message={"role": "user", "content": self.replies.pop(0)}, done=False, keep=keep,
                     info={"tool_calls": 1.0})


def scripted_model(monkeypatch, tokenizer, messages):
    """Make the model write `messages` (text, in the order messages are started; an EOS is added unless
    it ends with '~': a message the token budget cuts), log-prob -1 per token."""
    queue, script = iter(messages), {}

    def choose(logits, params, generator, rows, written):
        tokens = []
        for row, n in zip(rows, written):
            if n == 0:
                text = next(queue)
                ids = tokenizer(text.rstrip("~"), add_special_tokens=False).input_ids
                script[row] = ids if text.endswith("~") else [*ids, tokenizer.eos_token_id]
            tokens.append(script[row][n])
        return torch.tensor(tokens), torch.full((len(rows),), -1.0), torch.full((len(rows),), float("-inf"))

    monkeypatch.setattr(conv, "choose_tokens", choose)


def run(tiny, envs, *, max_turns=4, max_tokens=400, new_tokens=64, temperature=1.0, seed=0, stop_ids=None,
        rejoin_after=1, reply_to_cut=False):
    model, tokenizer = tiny
    trajectories = [conv.start(tokenizer, ASK) for _ in envs]
    return conv.converse(model, tokenizer, trajectories, envs, SamplingParams(new_tokens, temperature),
                         max_turns=max_turns, max_tokens=max_tokens, stop_ids=stop_ids or [tokenizer.eos_token_id],
                         seeds=[seed_of(seed, i) for i in range(len(envs))], rejoin_after=rejoin_after,
                         reply_to_cut=reply_to_cut)


def test_the_transcript_is_the_chat_template_of_the_conversation_and_the_mask_marks_model_tokens(tiny, monkeypatch):
    _, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ["50", "25", "37"])
    (t,) = run(tiny, [Scripted(["Lower.", "Higher."])])
    assert [m["content"] for m in t.messages] == ["Guess.", "50", "Lower.", "25", "Higher.", "37"]
    assert t.done and not t.truncated and t.reward == 1.0 and t.info == {"turns": 3.0, "tool_calls": 2.0}
    # the prompt and transcript are exactly what the chat template makes of the whole conversation
    rendered = tokenizer.apply_chat_template(t.messages, tokenize=False)
    assert tokenizer.decode([*t.prompt_ids, *t.ids]) == rendered.rstrip("\n")
    # token by token: the model wrote "50<eos>", "25<eos>", "37<eos>"; everything else is context
    eos = tokenizer.eos_token_id
    written = [[*tokenizer(m, add_special_tokens=False).input_ids, eos] for m in ("50", "25", "37")]
    model_tokens = [i for i, m in zip(t.ids, t.model_mask) if m]
    assert model_tokens == [i for w in written for i in w]
    runs, current, previous = [], [], None
    for i, m in zip(t.ids, t.model_mask):
        if m != previous and current:
            runs.append((previous, current))
            current = []
        current.append(i)
        previous = m
    runs.append((previous, current))
    assert [m for m, _ in runs] == [True, False, True, False, True]
    assert tokenizer.decode(runs[1][1]) == "\n<|im_start|>user\nLower.<|im_end|>\n<|im_start|>assistant\n"
    assert [lp for lp, m in zip(t.logprobs, t.model_mask) if not m] == [0.0] * (len(t.ids) - len(model_tokens))


def test_a_tool_call_ends_the_message_at_its_fence_and_the_context_closes_the_turn(tiny, monkeypatch):
    _, tokenizer = tiny
    call = "run:\n```python\nprint(1)\n```"
    scripted_model(monkeypatch, tokenizer, [call + "\nfake output 7", "done"])
    env = Scripted(["```output\n1\n```"], keep=lambda text: text.index("```\n", 12) + 3 if "```" in text else None)
    (t,) = run(tiny, [env])
    assert t.messages[1]["content"] == call  # what the model wrote after the call is dropped
    model_tokens = [i for i, m in zip(t.ids, t.model_mask) if m]
    assert tokenizer.decode(model_tokens) == call + "done<|im_end|>"
    assert "<|im_end|>\n<|im_start|>user\n```output\n1\n```" in tokenizer.decode(t.ids)  # the end marker is context


def test_limits_end_a_trajectory_as_truncated(tiny, monkeypatch):
    _, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ["1", "2", "3", "a long message cut~"])
    out = run(tiny, [Scripted(["more"] * 5)], max_turns=2)
    assert out[0].truncated and out[0].info["turns"] == 2.0  # out of turns
    cut_at = len(tokenizer("a long message cut", add_special_tokens=False).input_ids)
    (cut,) = run(tiny, [Scripted(["more"] * 5)], max_turns=2, new_tokens=cut_at)  # "3", then one the limit cuts
    assert cut.truncated and cut.info["turns"] == 2.0 and cut.messages[-1]["content"] == "a long message cut"
    scripted_model(monkeypatch, tokenizer, ["x" * 30])
    (budget,) = run(tiny, [Scripted(["more"])], max_tokens=10)
    assert budget.truncated and len(budget.ids) == 10  # the transcript's budget cuts the message


class CutBack:
    """Each message is kept only up to its middle (as a tool call cut at its fence), three times."""

    def __init__(self):
        self.turns = 0

    def reset(self, row, messages, seed):
        return messages

    def step(self, text):
        self.turns += 1
        if self.turns == 3:
            return Reply(message=None, done=True, reward=0.0)
        return Reply(message={"role": "user", "content": "Go on."}, done=False, keep=max(1, len(text) // 2))


def forward_logprobs(model, t):
    ids, prompt = torch.tensor([t.ids]), torch.tensor([t.prompt_ids])
    with torch.no_grad():
        stats = completion_logprobs(model, prompt, torch.ones_like(prompt, dtype=torch.bool), torch.tensor([0]),
                                    ids, torch.ones_like(ids, dtype=torch.bool), temperature=1.0)
    return stats.logprobs[0]


@pytest.mark.parametrize("env", [lambda: GuessNumber(max_turns=3), CutBack])
@pytest.mark.parametrize("rejoin_after", [1, 3])
def test_sampled_logprobs_of_model_tokens_equal_one_forward_over_the_whole_transcript(tiny, env, rejoin_after):
    """The cache kept across turns (rows leaving and joining, holes, messages cut back) computes what one
    forward over the finished transcript computes."""
    model, tokenizer = tiny
    # the random model seldom writes its end-of-turn token: any letter ends a message here, so that the
    # conversations run several turns
    letters = tokenizer("abcdefghijklmnopqrstuvwxyz", add_special_tokens=False).input_ids
    trajectories = run(tiny, [env() for _ in range(4)], new_tokens=24, max_tokens=300,
                       stop_ids=[tokenizer.eos_token_id, *letters], rejoin_after=rejoin_after)
    answered = 0
    for t in trajectories:
        assert sum(t.model_mask) > 0 and not all(t.model_mask)
        answered += any(not a and b for a, b in zip(t.model_mask, t.model_mask[1:]))  # wrote after a reply
        mask = torch.tensor(t.model_mask)
        expected = forward_logprobs(model, t)[mask].tolist()
        assert expected == pytest.approx(torch.tensor(t.logprobs)[mask].tolist(), abs=1e-4)
    assert answered >= 2


def test_a_row_decodes_as_it_would_alone(tiny):
    """Greedy: conversations decoded together are the ones each makes alone."""
    letters = tiny[1]("abcdefghij", add_special_tokens=False).input_ids
    kw = dict(new_tokens=12, max_tokens=200, temperature=0.0, stop_ids=[tiny[1].eos_token_id, *letters])
    together = run(tiny, [CutBack() for _ in range(3)], **kw)
    (alone,) = run(tiny, [CutBack()], **kw)
    for t in together:
        assert t.ids == alone.ids and t.model_mask == alone.model_mask
        assert t.logprobs == pytest.approx(alone.logprobs, abs=1e-5)


class Slow(Scripted):
    """A scripted environment whose replies take `seconds` (a tool running)."""

    def __init__(self, replies, seconds, log):
        super().__init__(replies)
        self.seconds, self.log = seconds, log

    def step(self, text):
        self.log.append(("tool", time.monotonic()))
        time.sleep(self.seconds)
        self.log.append(("reply", time.monotonic()))
        return super().step(text)


@pytest.mark.parametrize("rejoin_after", [1, 3])
def test_other_rows_keep_decoding_while_a_tool_runs(tiny, monkeypatch, rejoin_after):
    _, tokenizer = tiny
    log = []
    forward = conv.KVBatch.forward

    def logged(self):
        log.append(("forward", time.monotonic()))
        return forward(self)

    monkeypatch.setattr(conv.KVBatch, "forward", logged)
    scripted_model(monkeypatch, tokenizer, ["1", "a long message that keeps the batch busy", "2"])
    slow, chatty = Slow(["out"], 0.5, log), Scripted([])
    ts = run(tiny, [slow, chatty], rejoin_after=rejoin_after)
    assert [m["content"] for m in ts[0].messages] == ["Guess.", "1", "out", "2"]
    start, end = next(t for e, t in log if e == "tool"), next(t for e, t in log if e == "reply")
    during = [t for e, t in log if e == "forward" and start < t < end]
    assert len(during) == rejoin_after  # the others' steps while the tool ran, then the row waited for it


def test_a_complete_tool_call_stops_decoding_at_its_fence(tiny, monkeypatch):
    """python_tool's `message_done`: the model is not asked for a single token past the call's line."""
    from rlvr.envs.python_tool import PythonTool

    _, tokenizer = tiny
    asked = []
    call = "run:\n```python\nprint(6 * 7)\n```\n"
    scripted_model(monkeypatch, tokenizer, [call + "fake output 7", "it is 42"])
    choose = conv.choose_tokens
    monkeypatch.setattr(conv, "choose_tokens", lambda *a: asked.append(a[4][0]) or choose(*a))
    (t,) = run(tiny, [PythonTool(instructions=False)])
    assert [m["content"] for m in t.messages[1:]] == [call.rstrip("\n"), "```output\n42\n\n```", "it is 42"]
    first, second = (len(tokenizer(m, add_special_tokens=False).input_ids) for m in (call, "it is 42"))
    assert asked == [*range(first), *range(second + 1)]  # the call's tokens, then the answer and its EOS
    assert t.info["tool_calls"] == 1.0


def test_transcript_tensors_line_up_with_the_trajectories(tiny, monkeypatch):
    _, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ["1", "2", "3"])
    ts = run(tiny, [Scripted(["a"]), Scripted([])])
    out = conv.transcript_tensors(ts, pad_id=tokenizer.pad_token_id)
    for row, t in enumerate(ts):
        n = len(t.ids)
        assert out["completion_ids"][row, :n].tolist() == t.ids and out["completion_mask"][row].sum() == n
        assert out["model_mask"][row, :n].tolist() == t.model_mask and not out["model_mask"][row, n:].any()


# A chat template that lists tools and renders tool messages, and the response template that reads the
# calls it teaches (the Hermes/Qwen format), for transformers' parse_response.
TOOL_CHAT = (
    "{% if tools %}<|im_start|>system\nTools: {% for t in tools %}{{ t['function']['name'] }} {% endfor %}<|im_end|>\n"
    "{% endif %}{% for m in messages %}{% if m['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n"
    "{{ m['content'] }}</tool_response><|im_end|>\n{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
READS_CALLS = {
    "start_anchor": "<|im_start|>assistant\n", "defaults": {"role": "assistant"},
    "fields": {
        "tool_calls": {"open": "<tool_call>", "close_pattern": r"</tool_call>\s*", "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": "{content}"}},
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


def template_tool_run(tiny, monkeypatch, messages, **tool):
    from rlvr.envs.python_tool import PythonTool

    model, tokenizer = tiny
    tokenizer.chat_template, tokenizer.response_template = TOOL_CHAT, READS_CALLS
    scripted_model(monkeypatch, tokenizer, messages)
    env = PythonTool(**tool)
    env.bind(tokenizer)
    t = conv.start(tokenizer, env.reset({}, ASK, seed=0), env.tools)
    conv.converse(model, tokenizer, [t], [env], SamplingParams(160, 1.0), max_turns=4, max_tokens=600,
                  stop_ids=[tokenizer.eos_token_id], seeds=[0])
    return t, env, tokenizer


def test_a_tool_call_in_the_templates_own_format_runs_and_comes_back_as_a_tool_message(tiny, monkeypatch):
    from rlvr.envs.python_tool import TOOL_INSTRUCTIONS

    call = '<tool_call>\n{"name": "python", "arguments": {"code": "print(6 * 7)"}}\n</tool_call>'
    t, env, tokenizer = template_tool_run(tiny, monkeypatch, [call, "It is 42."])
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert t.messages[0]["content"] == TOOL_INSTRUCTIONS and t.messages[3]["content"] == "42\n"
    assert t.messages[2]["content"] == call and t.final_message == "It is 42."
    assert "Tools: python" in tokenizer.decode(t.prompt_ids)  # the prompt lists the tool, as the template does
    rendered = tokenizer.apply_chat_template(t.messages, tools=env.tools, tokenize=False)
    assert tokenizer.decode([*t.prompt_ids, *t.ids]) == rendered.rstrip("\n")
    assert t.info == {"turns": 2.0, "tool_calls": 1.0, "tool_errors": 0.0, "tool_timeouts": 0.0}


def test_an_unreadable_or_wrong_template_call_is_an_error_the_model_reads(tiny, monkeypatch):
    bad = ['<tool_call>{"name": "python", "arguments": {"code": </tool_call>',
           '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>', "Done."]
    t, _, _ = template_tool_run(tiny, monkeypatch, bad)
    assert t.messages[3]["content"].startswith("(the tool call could not be read")
    assert t.messages[5]["content"] == "(call the `python` tool with a `code` string)"
    assert t.info["tool_errors"] == 2.0 and t.final_message == "Done." and not t.truncated


def test_fenced_blocks_where_the_tokenizer_cannot_read_template_calls(tiny, monkeypatch):
    from rlvr.envs.python_tool import INSTRUCTIONS, PythonTool
    from rlvr.errors import UserError

    _, tokenizer = tiny  # ChatML without tools and without a response template
    env = PythonTool()
    env.bind(tokenizer)
    assert env.tools is None and env.reset({}, ASK, seed=0)[0]["content"] == INSTRUCTIONS
    with pytest.raises(UserError, match="call_format: fence"):
        PythonTool(call_format="template").bind(tokenizer)
    t, env, _ = template_tool_run(tiny, monkeypatch, ["```python\nprint(2)\n```\n", "2"], call_format="fence")
    assert env.tools is None and t.messages[3]["content"] == "```output\n2\n\n```"  # forced fences


class Broken(Scripted):
    """An environment with a bug in its step."""

    def step(self, text):
        return {}["missing"]


def test_an_environment_that_raises_ends_the_run_with_one_line(tiny, monkeypatch):
    from rlvr.errors import UserError

    _, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ["50"])
    with pytest.raises(UserError) as error:
        run(tiny, [Broken([])])
    assert str(error.value) == ("environment Broken.step() raised KeyError: 'missing' (fix the environment: a failed "
                                "tool call belongs in its Reply, as text for the model)")


class Awaiting(Scripted):
    """Scripted, with `async` methods that await (a tool server, say)."""

    async def reset(self, row, messages, seed):
        import asyncio

        await asyncio.sleep(0.01)
        return messages

    async def step(self, text):
        import asyncio

        await asyncio.sleep(0.01)
        return Scripted.step(self, text)


def test_an_environment_with_async_methods_converses_as_a_plain_one(tiny, monkeypatch):
    """`async def reset/step` are awaited on the worker threads that call them: the same transcript."""
    from rlvr.envs.base import calling

    _, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ["50", "25", "37"])
    (plain,) = run(tiny, [Scripted(["Lower.", "Higher."])])
    scripted_model(monkeypatch, tokenizer, ["50", "25", "37"])
    env = Awaiting(["Lower.", "Higher."])
    assert calling(env, "reset", {}, ASK, 0) == ASK  # (what the sampler's reset goes through)
    (awaited,) = run(tiny, [env])
    assert awaited.messages == plain.messages and awaited.ids == plain.ids and awaited.reward == 1.0


def test_every_call_of_a_message_runs_each_answered_by_its_own_tool_message(tiny, monkeypatch):
    calls = ('<tool_call>{"name":"python","arguments":{"code":"print(6*7)"}}</tool_call>'
             '<tool_call>{"name":"python","arguments":{"code":"print(2+3)"}}</tool_call>')  # (within 160 tokens)
    t, env, tokenizer = template_tool_run(tiny, monkeypatch, [calls, "42 and 5."])
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [t.messages[3]["content"], t.messages[4]["content"]] == ["42\n", "5\n"]
    assert t.info == {"turns": 2.0, "tool_calls": 2.0, "tool_errors": 0.0, "tool_timeouts": 0.0}
    rendered = tokenizer.apply_chat_template(t.messages, tools=env.tools, tokenize=False)
    assert tokenizer.decode([*t.prompt_ids, *t.ids]) == rendered.rstrip("\n")  # both results, as the template has it


class Adder:
    """A user's environment that takes the parsed calls: step(text, tool_calls), one tool message per call."""

    def __init__(self):
        self.seen = []
        self.tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "integer"}}}}}]

    def reset(self, row, messages, seed):
        return messages

    def step(self, text, tool_calls):
        self.seen.append(tool_calls)
        if not tool_calls:
            return Reply(None, done=True, reward=1.0)
        return Reply([{"role": "tool", "content": str(c["arguments"]["a"] + c["arguments"]["b"])} for c in tool_calls],
                     done=False)


def test_an_environment_that_takes_tool_calls_gets_every_call_of_the_message_parsed(tiny, monkeypatch):
    model, tokenizer = tiny
    tokenizer.chat_template = TOOL_CHAT  # (no response template: the Hermes/Qwen <tool_call> form is read)
    two = ('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
           '<think><tool_call>{"name": "add", "arguments": {"a": 0, "b": 0}}</tool_call></think>'
           '<tool_call>{"name": "add", "arguments": "{\\"a\\": 4, \\"b\\": 5}"}</tool_call>')
    scripted_model(monkeypatch, tokenizer, [two, "9 and 5."])
    env = Adder()
    t = conv.start(tokenizer, env.reset({}, ASK, seed=0), env.tools)
    conv.converse(model, tokenizer, [t], [env], SamplingParams(400, 1.0), max_turns=4, max_tokens=1200,
                  stop_ids=[tokenizer.eos_token_id], seeds=[0])
    assert [[(c["name"], c["arguments"]) for c in calls] for calls in env.seen] == [
        [("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 5})], []]  # (none inside thinking; string arguments read)
    assert [m["content"] for m in t.messages if m["role"] == "tool"] == ["5", "9"] and t.reward == 1.0


def test_a_failing_step_closes_every_environment_it_made_and_says_its_own_error(tiny):
    """The turn loop fails mid-rollout: each environment made is closed (one whose close fails too does not hide
    the step's error), as they are when trajectories end."""
    from rlvr.envs.sampling import conversations
    from rlvr.records import Example

    _, tokenizer = tiny
    made = []

    class Holding(Scripted):
        def __init__(self):
            super().__init__([])
            self.closed = 0
            made.append(self)

        def close(self):
            self.closed += 1
            if len(made) > 1 and self is made[1]:
                raise OSError("its server is gone too")

    def broken_loop(trajectories, envs, seeds):
        raise RuntimeError("the engine broke")
    with pytest.raises(RuntimeError, match="the engine broke"):
        conversations(broken_loop, tokenizer, [Example("q"), Example("r")], [ASK, ASK], 2, SamplingParams(8),
                      make_env=Holding, seeds=list(range(4)))
    assert [env.closed for env in made] == [1, 1, 1, 1]


def test_conversations_run_in_waves_of_max_sessions_drawing_what_the_whole_batch_draws(tiny):
    """environment.max_sessions: never more environments open at once (an OpenEnv server's max_concurrent_envs),
    each wave's closed before the next opens; each conversation draws from its own seed, as in one batch."""
    from rlvr.envs.sampling import sample_conversations
    from rlvr.records import Example

    model, tokenizer = tiny
    open_now, most = [], []

    class Counted(Scripted):
        def __init__(self):
            super().__init__(["Again.", "Once more."])
            open_now.append(self)
            most.append(len(open_now))

        def close(self):
            open_now.remove(self)

    def rollout(max_sessions):
        most.clear()
        out = sample_conversations(model, tokenizer, [Example("q"), Example("r")], [ASK, ASK], 3,
                                   SamplingParams(6, 1.0), make_env=Counted, max_turns=3, max_tokens=200,
                                   stop_ids=[tokenizer.eos_token_id], seeds=[seed_of(7, i) for i in range(6)],
                                   max_sessions=max_sessions)
        return out, max(most)

    whole, at_once = rollout(0)
    waves, in_waves = rollout(2)
    assert (at_once, in_waves) == (6, 2) and not open_now
    assert whole.transcripts == waves.transcripts and whole.completions == waves.completions
