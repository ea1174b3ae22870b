"""open-r1's GRPO rewards (accuracy with math-verify, then the <think>/<answer> format) on conversational
data with a system prompt, as open-r1's grpo.py trains them; model, output folder and data from the
environment so it runs offline."""

import os
import re

from datasets import Dataset
from math_verify import LatexExtractionConfig, parse, verify

from rlvr.trl import GRPOConfig, GRPOTrainer

MODEL = os.environ.get("MODEL", "Qwen/Qwen2.5-Math-1.5B")
OUTPUT_DIR = os.environ.get("OUTPUT_DIR", "data/Qwen2.5-1.5B-Open-R1-GRPO")
SYSTEM_PROMPT = ("A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
                 "The assistant first thinks about the reasoning process in the mind and then provides the user with "
                 "the answer. The reasoning process and answer are enclosed within <think> </think> and <answer> "
                 "</answer> tags, respectively.")


def make_conversation(example):
    return {"prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": example["problem"]}]}


dataset = Dataset.from_list([{"problem": f"What is {a} + {b}?", "solution": f"${a + b}$"}
                             for a in range(4) for b in range(4)]).map(make_conversation)


def accuracy_reward(completions, solution, **kwargs):
    """1.0 when the completion's answer equals the solution (math-verify), 0.0 otherwise; None when the
    solution cannot be parsed."""
    contents = [completion[0]["content"] for completion in completions]
    rewards = []
    for content, sol in zip(contents, solution):
        gold = parse(sol, extraction_mode="first_match", extraction_config=[LatexExtractionConfig()])
        if len(gold) != 0:
            answer = parse(content, extraction_mode="first_match")
            rewards.append(float(verify(gold, answer)))
        else:
            rewards.append(None)
    return rewards


def format_reward(completions, **kwargs):
    """1.0 when the completion is <think>...</think> then <answer>...</answer>."""
    pattern = r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$"
    contents = [completion[0]["content"] for completion in completions]
    return [1.0 if re.match(pattern, content, re.DOTALL | re.MULTILINE) else 0.0 for content in contents]


training_args = GRPOConfig(output_dir=OUTPUT_DIR, learning_rate=1e-5, max_steps=2, per_device_train_batch_size=8,
                           num_generations=4, max_completion_length=16, bf16=False, report_to="none",
                           logging_steps=1, save_strategy="no", seed=42)
trainer = GRPOTrainer(model=MODEL, reward_funcs=[accuracy_reward, format_reward], args=training_args,
                      train_dataset=dataset)
trainer.train()
trainer.save_model(training_args.output_dir)
