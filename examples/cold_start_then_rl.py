"""DeepSeek-R1's recipe in one Python script: a cold start (SFT on a few worked answers in the format the rewards
want), then GRPO from the fine-tuned model with a verifier. Both runs take rows in memory; each is a run
directory of its own, resumable (`.train(resume=True)`) and saved as a plain transformers folder.

    python examples/cold_start_then_rl.py
    python examples/cold_start_then_rl.py --model tiny --max-steps 2
"""

import argparse

from rlvr import GRPO, SFT

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=20)
parser.add_argument("--output-dir", default="runs/examples/cold_start_then_rl")
args = parser.parse_args()

pairs = [(a, b) for a in range(1, 10) for b in range(1, 10)]
question = "What is {} + {}? Put your final answer in \\boxed{{}}."
problems = [{"prompt": [{"role": "user", "content": question.format(a, b)}], "answer": str(a + b)} for a, b in pairs]
heldout = problems[::5]  # 17 sums held out: neither worked in the cold start nor trained on
train = [row for i, row in enumerate(problems) if i % 5]
worked = [{"prompt": row["prompt"], "completion": f"{a} + {b} = {a + b}. \\boxed{{{a + b}}}"}
          for i, (row, (a, b)) in enumerate(zip(problems, pairs)) if i % 5 and i % 3 == 0]  # the cold start

cold = SFT(args.model, train_data=worked, max_steps=args.max_steps, batch_size=8, output_dir=f"{args.output_dir}-sft")
print("cold start:", cold.train()["steps"], "steps")

rl = GRPO(f"{args.output_dir}-sft", rewards=["math_accuracy"], train_data=train, eval_data=heldout,
          max_steps=args.max_steps, output_dir=args.output_dir, data={"eval_size": len(heldout)})
summary = rl.train()
print("held-out accuracy after the cold start:", summary["before"]["strict"]["mean"],
      "after RL:", summary["after"]["strict"]["mean"])
rl.save(f"{args.output_dir}-model")
