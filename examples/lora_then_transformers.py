"""LoRA adapters trained with GRPO, merged into the base, and the merged model loaded and run by plain
transformers, without rlvr.

    python examples/lora_then_transformers.py
    python examples/lora_then_transformers.py --model tiny --max-steps 2
"""

import argparse

from transformers import AutoModelForCausalLM, AutoTokenizer

from rlvr import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=20)
parser.add_argument("--output-dir", default="runs/examples/lora")
args = parser.parse_args()

# the built-in one-digit arithmetic task, its verifier and its held-out split; rank-16 adapters
grpo = GRPO(args.model, train_data="arithmetic", max_steps=args.max_steps, output_dir=args.output_dir,
            config={"model": {"lora": {"rank": 16}}, "optim": {"lr": 2e-4}})
grpo.train()
merged = grpo.save(f"{args.output_dir}-merged", merge=True)  # one plain checkpoint, adapters folded in

model = AutoModelForCausalLM.from_pretrained(merged)
tokenizer = AutoTokenizer.from_pretrained(merged)
chat = [{"role": "user", "content": "What is 3 + 4? Put your final answer in \\boxed{}."}]
inputs = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
output = model.generate(**inputs, max_new_tokens=16, do_sample=False)
print(tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))
