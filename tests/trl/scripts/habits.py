"""TRL habits a script relies on: run again into the same output_dir (it starts afresh), train()'s TrainOutput
read by its fields, and save_model into a folder that exists (the first run's). Model, output folder and a small
local dataset from the environment, sized to run in seconds."""

import json
import os

from datasets import Dataset

from rlvr.trl import GRPOConfig, GRPOTrainer

MODEL = os.environ.get("MODEL", "Qwen/Qwen2-0.5B-Instruct")
OUTPUT_DIR = os.environ.get("OUTPUT_DIR", "Qwen2-0.5B-GRPO")
dataset = Dataset.from_list([{"prompt": f"Summarize: post number {i} about the weather."} for i in range(16)])


def reward_len(completions, **kwargs):
    return [-abs(20 - len(completion)) for completion in completions]


outputs = []
for _ in range(2):  # the same script run twice
    training_args = GRPOConfig(output_dir=OUTPUT_DIR, max_steps=2, per_device_train_batch_size=8, num_generations=4,
                               max_completion_length=16, bf16=False, report_to="none")
    trainer = GRPOTrainer(model=MODEL, reward_funcs=reward_len, args=training_args, train_dataset=dataset)
    result = trainer.train()
    outputs.append({"global_step": result.global_step, "training_loss": result.training_loss,
                    "metrics": result.metrics})
    trainer.save_model(os.path.join(OUTPUT_DIR, "final"))

with open(f"{OUTPUT_DIR}.train_outputs.json", "w") as f:
    json.dump(outputs, f)
