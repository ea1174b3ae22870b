"""An agent that runs its own loop, trained as it is: it talks to the policy through an OpenAI client, offers it a
calculator tool, runs the calls the model makes, and scores the answer itself. rlvr serves the policy behind an
OpenAI-compatible endpoint (one URL per rollout), records the exact tokens it samples, and trains on those.

    python examples/agent_harness.py
    python examples/agent_harness.py --model tiny --max-steps 2
"""

import argparse
import json

from rlvr import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=10)
parser.add_argument("--output-dir", default="runs/examples/agent")
args = parser.parse_args()

CALCULATOR = {"type": "function", "function": {
    "name": "multiply", "description": "Multiply two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}


def solve(link, row):
    """One rollout: any agent loop. `link` reaches the policy (`link.openai()` is an openai.OpenAI client on this
    rollout's URL); `row` is the dataset row. Returns the reward (and metrics of its own)."""
    client = link.openai()
    messages = list(row["prompt"])  # (with the chat template, a row's prompt comes as messages)
    calls = 0
    for _ in range(3):  # the model may call the tool twice, then must answer
        answer = client.chat.completions.create(model="policy", messages=messages, tools=[CALCULATOR],
                                                max_tokens=48).choices[0].message
        messages.append(answer.model_dump(exclude_none=True))
        if not answer.tool_calls:
            break
        for call in answer.tool_calls:  # every call of the message
            calls += 1
            try:
                given = json.loads(call.function.arguments)
                result = str(int(given["a"]) * int(given["b"]))
            except (ValueError, KeyError, TypeError) as e:
                result = f"error: {e}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    text = messages[-1].get("content") or ""
    return float(row["answer"] in text), {"calls": float(calls)}


rows = [{"prompt": f"What is {a} times {b}? Use the multiply tool.", "answer": str(a * b)}
        for a in range(11, 19) for b in (3, 7)]
grpo = GRPO(args.model, train_data=rows, environment=solve, max_steps=args.max_steps, output_dir=args.output_dir,
            eval_before=False, eval_after=False,
            config={"generation": {"max_new_tokens": 48}, "sampling": {"group_size": 4, "batch_size": 16}})
grpo.train()  # metrics.jsonl: reward/agent_reward, env/turns, env/rows, env/calls, env/errors
