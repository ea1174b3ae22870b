"""An agent loop with feedback, trained through the policy's endpoint: it asks a question (after an example
exchange of its own), checks the answer, and when it is wrong (or not in \\boxed{}) says so and asks once more.
The reward is 1 for a right first answer, 0.5 for a right second one. The measured job (docs/environments.md):
SmolLM2-135M-Instruct on 1-digit addition, 40 steps of 4 prompts × 8 runs.

    python examples/feedback_agent.py                       # SmolLM2, 40 steps, runs/examples/feedback
    python examples/feedback_agent.py --model tiny --max-steps 2
"""

import argparse

from rlvr import GRPO
from rlvr.rewards.extraction import boxed_contents

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=40)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--output-dir", default="runs/examples/feedback")
args = parser.parse_args()


def right(text, answer):
    """The last \\boxed{} holds the answer."""
    return boxed_contents(text or "")[-1:] == [str(answer)]


EXAMPLE = [{"role": "user", "content": "What is 10 + 10? Put your final answer in \\boxed{}."},
           {"role": "assistant", "content": "\\boxed{20}"}]  # the agent shows the form once, in its own prompt


def retry(link, row):
    """Two tries at most, the second after the agent's feedback; the policy is reached with link.chat."""
    messages = [*EXAMPLE, *row["prompt"]]  # (the chat template's rows: the prompt as messages)
    first = link.chat(messages)["choices"][0]["message"]
    if right(first["content"], row["answer"]):
        return 1.0, {"first_try": 1.0}
    messages += [first, {"role": "user", "content": "That is not right. Think again, and put only the final "
                                                    "number in \\boxed{}."}]
    second = link.chat(messages)["choices"][0]["message"]
    return (0.5 if right(second["content"], row["answer"]) else 0.0), {"first_try": 0.0}


grpo = GRPO(args.model, train_data="arithmetic", environment=retry, max_steps=args.max_steps, seed=args.seed,
            output_dir=args.output_dir, config={"data": {"few_shot": []}, "sampling": {"batch_size": 32}})
grpo.train()  # metrics.jsonl: reward/agent_reward, env/first_try, env/turns; summary.json: held-out before/after
