"""A `datasets.Dataset` built in memory, open-r1's pair of rewards (accuracy first, then format), trained
without writing a data file: rlvr keeps a JSONL snapshot of the rows in RUN_DIR/inputs/.

    python examples/dataset_in_memory.py
    python examples/dataset_in_memory.py --model tiny --max-steps 2
"""

import argparse
import re

from datasets import Dataset

from rlvr import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=20)
parser.add_argument("--output-dir", default="runs/examples/dataset")
args = parser.parse_args()

pairs = [(a, b) for a in range(2, 10) for b in range(2, 10)]
dataset = Dataset.from_dict({"question": [f"What is {a} + {b}?" for a, b in pairs],
                             "solution": [str(a + b) for a, b in pairs]})
dataset = dataset.map(lambda row: {"prompt": [{"role": "user", "content": row["question"] + " Put your final "
                                                                                            "answer in \\boxed{}."}]})


def accuracy(completions, solution, **kwargs):
    """1.0 when the last \\boxed{} holds the solution (listed first: the run's `accuracy`)."""
    found = [re.findall(r"\\boxed\{([^}]*)\}", c[0]["content"]) for c in completions]
    return [float(bool(boxes) and boxes[-1].strip() == s) for boxes, s in zip(found, solution)]


def boxed_once(completions, **kwargs):
    """0.1-weighted below: one \\boxed{} answer."""
    return [float(c[0]["content"].count("\\boxed{") == 1) for c in completions]


train, heldout = dataset.train_test_split(test_size=16, seed=0).values()
grpo = GRPO(args.model, rewards=[accuracy, {"name": boxed_once, "weight": 0.1}], train_data=train,
            eval_data=heldout, max_steps=args.max_steps, output_dir=args.output_dir, data={"eval_size": 16})
summary = grpo.train()
print("held-out accuracy before:", summary["before"]["strict"]["mean"], "after:", summary["after"]["strict"]["mean"])
