"""A vLLM-backed run (use_vllm, colocated with the trainer), as TRL's docs show one; model, output folder and
data from the environment so it runs offline. Needs vLLM (the tests run it in vLLM's own venv)."""

import os

from datasets import Dataset

from rlvr.trl import GRPOConfig, GRPOTrainer

MODEL = os.environ.get("MODEL", "Qwen/Qwen2-0.5B-Instruct")
OUTPUT_DIR = os.environ.get("OUTPUT_DIR", "Qwen2-0.5B-GRPO-vLLM")
dataset = Dataset.from_list([{"prompt": f"Name a colour, number {i}."} for i in range(16)])


def reward_len(completions, **kwargs):
    return [-abs(20 - len(completion)) for completion in completions]


training_args = GRPOConfig(output_dir=OUTPUT_DIR, max_steps=2, per_device_train_batch_size=8, num_generations=4,
                           max_completion_length=16, bf16=False, report_to="none", use_vllm=True,
                           vllm_mode="colocate", vllm_gpu_memory_utilization=0.3)
trainer = GRPOTrainer(model=MODEL, reward_funcs=reward_len, args=training_args, train_dataset=dataset)
trainer.train()
