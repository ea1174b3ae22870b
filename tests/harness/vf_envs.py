"""verifiers environments written as a verifiers user writes them (classic API), for the adapter's tests:
`load_environment(kind=...)` gives a SingleTurnEnv with a weighted rubric and a group reward, a MultiTurnEnv game
with its own env_response, a ToolEnv with a Python-function tool, or a SingleTurnEnv
scored by a JudgeRubric."""

import verifiers as vf
from datasets import Dataset

QUESTIONS = [{"question": f"What is {a} + {a}?", "answer": str(2 * a)} for a in range(1, 9)]


def correct(completion, answer, **kwargs):
    return float(answer in str(completion[-1]["content"] if isinstance(completion, list) else completion))


def length(completion, **kwargs):
    text = completion[-1]["content"] if isinstance(completion, list) else completion
    return len(text or "") / 10


def shortest_in_group(completions, **kwargs):
    """A group reward: 1 for the group's shortest completion."""
    sizes = [len(str(c)) for c in completions]
    return [float(s == min(sizes)) for s in sizes]


def has_digit(completion, **kwargs):
    return float(any(c.isdigit() for c in completion[-1]["content"] or ""))


def one_score_for_the_group(completions, **kwargs):
    """A group reward with a bug: one score however many completions."""
    return [1.0]


def broken(completion, **kwargs):
    raise ValueError("the rubric's own bug")


class Guess(vf.MultiTurnEnv):
    """Say a word; the environment answers 'longer' until the reply has at least 4 characters, 3 turns at most."""

    async def env_response(self, messages, state, **kwargs):
        last = messages[-1]["content"] or ""
        state["done"] = len(last) >= 4
        return [{"role": "user", "content": "good" if state["done"] else "longer"}]

    @vf.stop
    async def guessed(self, state, **kwargs):
        return bool(state.get("done"))


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def judged_right(judge, prompt, completion, answer, state, **kwargs):
    """A JudgeRubric's reward: its judge model's yes or no."""
    return float("yes" in (await judge(prompt, completion, answer, state)).lower())


def load_environment(kind="single", rows=8, raise_in_rubric=False, judge=None, short_group=False):
    dataset = Dataset.from_list(QUESTIONS[:rows])
    if kind == "single":
        funcs = [correct, length, one_score_for_the_group if short_group else shortest_in_group]
        funcs += [broken] if raise_in_rubric else []
        rubric = vf.Rubric(funcs=funcs, weights=[1.0, 0.5, 0.25] + ([1.0] if raise_in_rubric else []))
        return vf.SingleTurnEnv(dataset=dataset, eval_dataset=dataset, rubric=rubric)
    if kind == "digit":
        return vf.SingleTurnEnv(dataset=dataset, rubric=vf.Rubric(funcs=[has_digit]))
    if kind == "judge":  # (judge: the base URL of an OpenAI-compatible judge; one client shared by every rollout)
        from openai import AsyncOpenAI

        rubric = vf.JudgeRubric(judge_client=AsyncOpenAI(base_url=judge, api_key="judge", max_retries=0),
                                judge_model="judge")
        rubric.add_reward_func(judged_right)
        return vf.SingleTurnEnv(dataset=dataset, rubric=rubric)
    if kind == "game":
        return Guess(dataset=dataset, rubric=vf.Rubric(funcs=[length]), max_turns=3)
    if kind == "tool":
        return vf.ToolEnv(dataset=dataset, tools=[add], max_turns=3, rubric=vf.Rubric(funcs=[length]))
    raise ValueError(f"unknown kind {kind!r}")
