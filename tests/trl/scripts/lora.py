"""A LoRA run through peft_config, as TRL's docs show one, then the adapters saved and loaded by peft;
model, output folder and data from the environment so it runs offline."""

import os

from datasets import Dataset
from peft import LoraConfig

from rlvr.trl import GRPOConfig, GRPOTrainer

MODEL = os.environ.get("MODEL", "Qwen/Qwen2-0.5B-Instruct")
OUTPUT_DIR = os.environ.get("OUTPUT_DIR", "Qwen2-0.5B-GRPO-LoRA")
dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Count to {n}."}]} for n in range(16)])


def reward_digits(completions, **kwargs):
    return [sum(ch.isdigit() for ch in c[0]["content"]) / max(1, len(c[0]["content"])) for c in completions]


peft_config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
training_args = GRPOConfig(output_dir=OUTPUT_DIR, learning_rate=1e-4, max_steps=2, per_device_train_batch_size=8,
                           num_generations=4, max_completion_length=16, bf16=False, report_to="none",
                           gradient_checkpointing=False)
trainer = GRPOTrainer(model=MODEL, reward_funcs=reward_digits, args=training_args, train_dataset=dataset,
                      peft_config=peft_config)
trainer.train()
trainer.save_model(os.path.join(OUTPUT_DIR, "adapters"))
