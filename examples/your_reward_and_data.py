"""Your data and your reward, from Python: a list of rows and a TRL-style reward function, trained with GRPO
and evaluated held-out by that same function (the rows have no `answer` column, so rlvr has no verifier of
its own for them).

    python examples/your_reward_and_data.py                      # SmolLM2-135M-Instruct, 20 steps (CPU: minutes)
    python examples/your_reward_and_data.py --model tiny --max-steps 2   # a smoke run in seconds
"""

import argparse
import random

from rlvr import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=20)
parser.add_argument("--output-dir", default="runs/examples/your_reward")
args = parser.parse_args()

# Rows: a `prompt`, and any columns your reward reads (here `word`).
words = ["apple", "river", "stone", "cloud", "green", "music", "table", "light", "ocean", "tiger"]
random.seed(0)
rows = [{"prompt": f"Write the word {w!r} backwards. Answer with the reversed word only.", "word": w}
        for w in random.choices(words, k=200)]
train, heldout = rows[:160], rows[160:]


def reversed_word(completions, word, **kwargs):
    """1.0 when the answer is the word reversed, 0.5 when it contains it, else 0.0 (a completion of a chat
    prompt is [{"role": "assistant", "content": text}], as in TRL)."""
    scores = []
    for completion, w in zip(completions, word):
        text = completion[0]["content"].strip().lower()
        scores.append(1.0 if text == w[::-1] else 0.5 if w[::-1] in text else 0.0)
    return scores


grpo = GRPO(args.model, rewards=[reversed_word], train_data=train, eval_data=heldout, max_steps=args.max_steps,
            output_dir=args.output_dir, generation={"max_new_tokens": 16}, data={"eval_size": 40})
summary = grpo.train()  # greedy held-out accuracy before and after, judged by reversed_word (1.0 counts as right)
print("held-out accuracy before:", summary["before"]["strict"]["mean"], "after:", summary["after"]["strict"]["mean"])
results = grpo.evaluate(samples=4)  # pass@1 and pass@4 of the trained model on the held-out rows
print("pass@4:", results["strict"]["pass@k"]["4"])
