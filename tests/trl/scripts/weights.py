"""Two rewards weighted by reward_weights, the batch's std as the scale (scale_rewards="batch") and TRL's
"grpo" loss; model, output folder and data from the environment so it runs offline."""

import os

from datasets import Dataset

from rlvr.trl import GRPOConfig, GRPOTrainer

MODEL = os.environ.get("MODEL", "Qwen/Qwen2-0.5B-Instruct")
OUTPUT_DIR = os.environ.get("OUTPUT_DIR", "Qwen2-0.5B-GRPO-weighted")
dataset = Dataset.from_list([{"prompt": f"What is {a} times {b}?", "answer": str(a * b)}
                             for a in range(1, 5) for b in range(1, 5)])


def contains_answer(completions, answer, **kwargs):
    return [float(ans in completion) for completion, ans in zip(completions, answer)]


def brevity(completions, **kwargs):
    return [-len(completion) / 100 for completion in completions]


training_args = GRPOConfig(output_dir=OUTPUT_DIR, max_steps=2, per_device_train_batch_size=4,
                           gradient_accumulation_steps=2, num_generations=4, max_completion_length=16, bf16=False,
                           report_to="none", reward_weights=[1.0, 0.5], scale_rewards="batch", loss_type="grpo",
                           beta=0.04)
trainer = GRPOTrainer(model=MODEL, reward_funcs=[contains_answer, brevity], args=training_args,
                      train_dataset=dataset)
trainer.train()
