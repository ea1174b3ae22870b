"""TRL's GRPO quick start (its docs' "Quick start": reward_len on text prompts), with the model, the output
folder and a small local dataset from the environment so it runs offline, and sized to run in seconds
(max_steps, batch, completion length)."""

import os

from datasets import Dataset

from rlvr.trl import GRPOConfig, GRPOTrainer

MODEL = os.environ.get("MODEL", "Qwen/Qwen2-0.5B-Instruct")
OUTPUT_DIR = os.environ.get("OUTPUT_DIR", "Qwen2-0.5B-GRPO")
dataset = Dataset.from_list([{"prompt": f"Summarize: post number {i} about the weather."} for i in range(16)])


# Dummy reward function: rewards completions that are close to 20 characters
def reward_len(completions, **kwargs):
    return [-abs(20 - len(completion)) for completion in completions]


training_args = GRPOConfig(output_dir=OUTPUT_DIR, max_steps=2, per_device_train_batch_size=8, num_generations=4,
                           max_completion_length=16, bf16=False, report_to="none")
trainer = GRPOTrainer(
    model=MODEL,
    reward_funcs=reward_len,
    args=training_args,
    train_dataset=dataset,
)
trainer.train()
