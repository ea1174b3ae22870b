"""An agent written with the OpenAI Agents SDK, trained as it is: an `Agent` with a function tool, run by the
`Runner` over the Responses API. rlvr serves the policy behind an OpenAI-compatible endpoint (one URL per rollout:
`link.base_url`, `link.api_key`), records the exact tokens it samples, and trains on those.

    python examples/openai_agents_sdk.py
    python examples/openai_agents_sdk.py --model tiny --max-steps 2
"""

import argparse
import asyncio
import logging

from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from agents.exceptions import MaxTurnsExceeded, ModelBehaviorError
from openai import AsyncOpenAI

from rlvr import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=10)
parser.add_argument("--output-dir", default="runs/examples/openai_agents")
args = parser.parse_args()
set_tracing_disabled(True)  # traces would go to OpenAI's servers
logging.getLogger("openai.agents").setLevel(logging.CRITICAL)  # it logs each answer cut below as an error


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def solve(link, row):
    """One rollout: the Runner asks, runs each function call, sends its output, and asks again."""
    client = AsyncOpenAI(base_url=link.base_url, api_key=link.api_key, max_retries=0)
    agent = Agent(name="calculator", instructions="Use the multiply tool, then answer with the number.",
                  tools=[multiply], model=OpenAIResponsesModel(model="policy", openai_client=client))
    try:
        result = asyncio.run(Runner.run(agent, row["question"], max_turns=3))
    except MaxTurnsExceeded:  # still calling tools at the third turn: no answer
        return 0.0
    except ModelBehaviorError:  # the SDK raises on an answer cut at max_new_tokens (OpenAI's "incomplete")
        return 0.0
    return float(row["answer"] in str(result.final_output))


rows = [{"prompt": f"What is {a} times {b}?", "question": f"What is {a} times {b}?", "answer": str(a * b)}
        for a in range(11, 19) for b in (3, 7)]
grpo = GRPO(args.model, train_data=rows, environment=solve, max_steps=args.max_steps, output_dir=args.output_dir,
            eval_before=False, eval_after=False,
            config={"generation": {"max_new_tokens": 48}, "sampling": {"group_size": 4, "batch_size": 16}})
grpo.train()  # metrics.jsonl: reward/agent_reward, env/turns, env/rows, env/errors
