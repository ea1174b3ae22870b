"""A TRL GRPO script ported to rlvr by changing its import line (`from trl import ...` before): TRL's names,
TRL's defaults, rlvr's engine. docs/from_trl.md has the table.

    python examples/ported_from_trl.py
    python examples/ported_from_trl.py --model tiny --max-steps 2
"""

import argparse

from datasets import Dataset

from rlvr.trl import GRPOConfig, GRPOTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=20)
parser.add_argument("--output-dir", default="runs/examples/trl")
args = parser.parse_args()

dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": f"What is {a} + {b}? Put your final answer "
                                                                       "in \\boxed{}."}], "solution": str(a + b)}
                             for a in range(10) for b in range(10)])


def accuracy_reward(completions, solution, **kwargs):
    return [float(f"\\boxed{{{s}}}" in c[0]["content"]) for c, s in zip(completions, solution)]


training_args = GRPOConfig(output_dir=args.output_dir, learning_rate=2e-5, max_steps=args.max_steps,
                           num_generations=8, per_device_train_batch_size=32, max_completion_length=64,
                           temperature=0.7, beta=0.04, logging_steps=1, report_to="none")
trainer = GRPOTrainer(model=args.model, reward_funcs=accuracy_reward, args=training_args, train_dataset=dataset)
trainer.train()
trainer.save_model()  # output_dir/model: a folder transformers loads
