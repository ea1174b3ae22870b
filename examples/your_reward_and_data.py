"""Your data and your reward, from Python: a list of rows and a TRL-style reward function, trained with GRPO
and evaluated held-out by that same function (the README's quick start, with the rows in memory; they have no
`answer` column, so rlvr has no verifier of its own for them).

    python examples/your_reward_and_data.py                      # SmolLM2-135M-Instruct, 10 steps (8–10 min on 2 cores)
    python examples/your_reward_and_data.py --model tiny --max-steps 2   # a smoke run in seconds
"""

import argparse
import random
import re

from rlvr import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=10)
parser.add_argument("--output-dir", default="runs/examples/your_reward")
args = parser.parse_args()

# Rows: a `prompt`, and any columns your reward reads (here `total`): every sum of two digits, 30 held out.
pairs = [(a, b) for a in range(10) for b in range(10)]
random.Random(0).shuffle(pairs)
rows = [{"prompt": f"What is {a} + {b}?", "total": a + b} for a, b in pairs]
train, heldout = rows[:70], rows[70:]


def correct_sum(completions, total, **kwargs):
    """1.0 when the completion's last number is the sum, else 0.0 (a completion of a chat prompt is
    [{"role": "assistant", "content": text}], as in TRL)."""
    last = [re.findall(r"-?\d+", completion[0]["content"])[-1:] for completion in completions]
    return [float(n == [str(t)]) for n, t in zip(last, total)]


grpo = GRPO(args.model, rewards=[correct_sum], train_data=train, eval_data=heldout, max_steps=args.max_steps,
            output_dir=args.output_dir)
summary = grpo.train()  # greedy held-out accuracy before and after, judged by correct_sum (1.0 counts as right)
print("held-out accuracy before:", summary["before"]["strict"]["mean"], "after:", summary["after"]["strict"]["mean"])
results = grpo.evaluate(samples=4)  # pass@1 and pass@4 of the trained model on the held-out rows
print("pass@4:", results["strict"]["pass@k"]["4"])
