"""Multi-turn rollouts: the transcript token by token (model tokens under the mask, the template's
markers and the environment's messages outside it), the turn and token limits, tool calls that end a
message, and the sampled log-probs of model tokens equal to one forward over the whole transcript."""

import pytest
import torch

from rlvr.envs import Reply
from rlvr.envs import rollout as conv
from rlvr.envs.guess import GuessNumber
from rlvr.logprobs import completion_logprobs
from rlvr.rollout import Completions, SamplingParams

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
    """Make `generate` answer each call with the next of `messages` (text; an EOS is added unless it ends
    with '~', which stands for a message cut by the token limit), log-prob -1 per token."""
    calls = iter(messages)

    def fake(model, prompts, group_size, params, *, stop_ids, pad_id, generator=None):
        rows = []
        for _ in prompts:
            text = next(calls)
            ids = tokenizer(text.rstrip("~"), add_special_tokens=False).input_ids
            rows.append((ids if text.endswith("~") else [*ids, tokenizer.eos_token_id])[:params.max_new_tokens])
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), pad_id)
        mask = torch.zeros((len(rows), width), dtype=torch.bool)
        for i, r in enumerate(rows):
            ids[i, :len(r)], mask[i, :len(r)] = torch.tensor(r), True
        return Completions(prompt_ids=ids[:, :0], prompt_mask=mask[:, :0], completion_ids=ids, completion_mask=mask,
                           logprobs=-1.0 * mask, truncated=torch.zeros(len(rows), dtype=torch.bool))

    monkeypatch.setattr(conv, "generate", fake)


def run(tiny, envs, *, max_turns=4, max_tokens=400, new_tokens=64, temperature=1.0, seed=0, stop_ids=None):
    model, tokenizer = tiny
    trajectories = [conv.start(tokenizer, ASK) for _ in envs]
    return conv.converse(model, tokenizer, trajectories, envs, SamplingParams(new_tokens, temperature),
                         max_turns=max_turns, max_tokens=max_tokens, stop_ids=stop_ids or [tokenizer.eos_token_id],
                         generator=torch.Generator().manual_seed(seed))


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
    (cut,) = run(tiny, [Scripted(["more"] * 5)], max_turns=2)  # "3" then a message cut by the token limit
    assert cut.truncated and cut.info["turns"] == 2.0 and cut.messages[-1]["content"] == "a long message cut"
    scripted_model(monkeypatch, tokenizer, ["x" * 30])
    (budget,) = run(tiny, [Scripted(["more"])], max_tokens=10)
    assert budget.truncated and len(budget.ids) == 10  # the transcript's budget cuts the message


def test_sampled_logprobs_of_model_tokens_equal_one_forward_over_the_whole_transcript(tiny):
    model, tokenizer = tiny
    # the random model seldom writes its end-of-turn token: any letter ends a message here, so that the
    # conversations run several turns
    letters = tokenizer("abcdefghijklmnopqrstuvwxyz", add_special_tokens=False).input_ids
    trajectories = run(tiny, [GuessNumber(max_turns=3) for _ in range(3)], new_tokens=8, max_tokens=200,
                       stop_ids=[tokenizer.eos_token_id, *letters])
    for t in trajectories:
        assert sum(t.model_mask) > 0 and not all(t.model_mask)
        ids = torch.tensor([t.ids])
        prompt = torch.tensor([t.prompt_ids])
        with torch.no_grad():
            stats = completion_logprobs(model, prompt, torch.ones_like(prompt, dtype=torch.bool), torch.tensor([0]),
                                        ids, torch.ones_like(ids, dtype=torch.bool), temperature=1.0)
        mask = torch.tensor(t.model_mask)
        assert stats.logprobs[0][mask].tolist() == pytest.approx(torch.tensor(t.logprobs)[mask].tolist(), abs=1e-4)


def test_transcript_tensors_line_up_with_the_trajectories(tiny, monkeypatch):
    _, tokenizer = tiny
    scripted_model(monkeypatch, tokenizer, ["1", "2", "3"])
    ts = run(tiny, [Scripted(["a"]), Scripted([])])
    out = conv.transcript_tensors(ts, pad_id=tokenizer.pad_token_id)
    for row, t in enumerate(ts):
        n = len(t.ids)
        assert out["completion_ids"][row, :n].tolist() == t.ids and out["completion_mask"][row].sum() == n
        assert out["model_mask"][row, :n].tolist() == t.model_mask and not out["model_mask"][row, n:].any()
