"""An agent written with the anthropic SDK, trained as it is: a tool loop over the Messages API, with a calculator
tool it runs itself. rlvr serves the policy behind an Anthropic-compatible endpoint (one URL per rollout:
`link.anthropic()` is an `anthropic.Anthropic` client on it), records the exact tokens it samples, and trains on
those. (An OpenAI Agents SDK `Runner` trains the same way over the Responses API: docs/environments.md.)

    python examples/anthropic_agent.py
    python examples/anthropic_agent.py --model tiny --max-steps 2
"""

import argparse

from rlvr import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=10)
parser.add_argument("--output-dir", default="runs/examples/anthropic")
args = parser.parse_args()

MULTIPLY = {"name": "multiply", "description": "Multiply two integers.",
            "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                             "required": ["a", "b"]}}


def solve(link, row):
    """One rollout, as the anthropic SDK's docs write a tool loop: ask, run each tool_use, send its tool_result."""
    client = link.anthropic()
    messages = [{"role": "user", "content": row["question"]}]
    calls = 0
    for _ in range(3):  # the model may call the tool twice, then must answer
        answer = client.messages.create(model="policy", max_tokens=48, tools=[MULTIPLY], messages=messages)
        messages.append({"role": "assistant", "content": [block.model_dump() for block in answer.content]})
        if answer.stop_reason != "tool_use":
            break
        results = []
        for block in answer.content:
            if block.type == "tool_use":
                calls += 1
                try:
                    result = str(int(block.input["a"]) * int(block.input["b"]))
                except (KeyError, TypeError, ValueError) as e:
                    result = f"error: {e}"
                results.append({"type": "tool_result", "tool_use_id": block.id, "content": result})
        messages.append({"role": "user", "content": results})
    text = "".join(block.text for block in answer.content if block.type == "text")
    return float(row["answer"] in text), {"calls": float(calls)}


rows = [{"prompt": f"What is {a} times {b}? Use the multiply tool.", "question": f"What is {a} times {b}?",
         "answer": str(a * b)} for a in range(11, 19) for b in (3, 7)]
grpo = GRPO(args.model, train_data=rows, environment=solve, max_steps=args.max_steps, output_dir=args.output_dir,
            eval_before=False, eval_after=False,
            config={"generation": {"max_new_tokens": 48}, "sampling": {"group_size": 4, "batch_size": 16}})
grpo.train()  # metrics.jsonl: reward/agent_reward, env/turns, env/rows, env/calls, env/errors
