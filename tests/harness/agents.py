"""Agent functions the harness tests train with (loaded by path, as a user's file is)."""

import json


def _question(row):
    prompt = row["prompt"]
    return prompt if isinstance(prompt, str) else prompt[-1]["content"]


def keeps_history(link, row):
    """Two turns over one growing conversation (one row per trajectory); scores the second answer's length."""
    messages = [{"role": "user", "content": _question(row)}]
    first = link.chat(messages, max_tokens=6)["choices"][0]["message"]
    messages += [first, {"role": "user", "content": "again"}]
    second = link.chat(messages, max_tokens=6)["choices"][0]["message"]
    return len(second["content"]) / 10, {"chars": float(len(first["content"]) + len(second["content"]))}


def rewrites_history(link, row):
    """The second request drops the first answer (a summarising agent): two rows per trajectory."""
    first = link.chat([{"role": "user", "content": _question(row)}], max_tokens=6)["choices"][0]["message"]
    summary = [{"role": "user", "content": f"earlier you said {len(first['content'])} characters; go on"}]
    second = link.chat(summary, max_tokens=6)["choices"][0]["message"]
    return (len(first["content"]) + 2 * len(second["content"])) / 20


async def with_openai(link, row):
    """An async agent on the openai SDK's async client: one turn."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=link.base_url, api_key=link.api_key, max_retries=0)
    messages = [{"role": "user", "content": _question(row)}]
    answer = await client.chat.completions.create(model="policy", messages=messages, max_tokens=6)
    await client.close()
    return len(answer.choices[0].message.content or "") / 10


def always_raises(link, row):
    link.chat([{"role": "user", "content": _question(row)}], max_tokens=2)
    raise RuntimeError("the agent's own bug")


def takes_one_argument(link):
    return 0.0


ADD = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {
    "a": {"type": "integer"}, "b": {"type": "integer"}}}}}


def calculator(link, row):
    """The openai client with a tool offered: every call of a message run, its result sent back, until an answer."""
    client = link.openai()
    messages = [{"role": "user", "content": _question(row)}]
    for _ in range(3):
        answer = client.chat.completions.create(model="policy", messages=messages, tools=[ADD]).choices[0].message
        messages.append(answer.model_dump(exclude_none=True))
        if not answer.tool_calls:
            break
        for call in answer.tool_calls:
            given = json.loads(call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(given["a"] + given["b"])})
    calls = sum(m["role"] == "tool" for m in messages)
    return float(any(c.isdigit() for c in messages[-1].get("content") or "")), {"calls": float(calls)}


CALLS = []


def exits_at_the_second_step(link, row):
    """Answers the 8 runs of step 1, then calls sys.exit(7)."""
    CALLS.append(row)
    if len(CALLS) > 8:
        import sys

        sys.exit(7)
    link.chat([{"role": "user", "content": _question(row)}], max_tokens=2)
    return 1.0 if len(CALLS) % 2 else 0.0


def openai_agents_sdk(link, row):
    """An OpenAI Agents SDK agent as its docs write one: an Agent with a function tool, run by the Runner; only the
    base URL and the key come from rlvr."""
    import asyncio

    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    client = AsyncOpenAI(base_url=link.base_url, api_key=link.api_key, max_retries=0)
    agent = Agent(name="calculator", instructions="Use the add tool.", tools=[add],
                  model=OpenAIResponsesModel(model="policy", openai_client=client))
    result = asyncio.run(Runner.run(agent, _question(row), max_turns=3))
    return float(str(result.final_output).strip() == "5")


def anthropic_tool_loop(link, row):
    """A tool loop as the anthropic SDK's docs write it: ask, run each tool_use, send its tool_result, ask again."""
    client = link.anthropic()
    tools = [{"name": "add", "description": "Add two integers.",
              "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                               "required": ["a", "b"]}}]
    messages = [{"role": "user", "content": _question(row)}]
    for _ in range(3):
        answer = client.messages.create(model="policy", max_tokens=64, tools=tools, messages=messages)
        if answer.stop_reason != "tool_use":
            return float(answer.content[0].text.strip() == "5")
        messages.append({"role": "assistant", "content": [block.model_dump() for block in answer.content]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block.id, "content": str(block.input["a"] + block.input["b"])}
            for block in answer.content if block.type == "tool_use"]})
    return 0.0


def rewards_each_turn(link, row):
    """Two turns, each given a reward once answered (its length, then minus its length); returns None: the
    rollout's reward is what its turns were given."""
    messages = [{"role": "user", "content": _question(row)}]
    first = link.chat(messages, max_tokens=6)["choices"][0]["message"]
    link.reward(len(first["content"]) / 10)
    messages += [first, {"role": "user", "content": "again"}]
    second = link.chat(messages, max_tokens=6)["choices"][0]["message"]
    link.reward(-len(second["content"]) / 20)


RUNS = []


def raises_every_other_time(link, row):
    """Every second run fails (an empty, unscored row); of the others, every second one scores 1."""
    RUNS.append(row)
    run = len(RUNS)  # (runs go on at once: counted on entry)
    if run % 2 == 0:
        raise RuntimeError("a flaky tool")
    link.chat([{"role": "user", "content": _question(row)}], max_tokens=4)
    return float(run % 4 == 1)
