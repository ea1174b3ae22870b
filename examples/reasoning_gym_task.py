"""A reasoning-gym task, scored by its own scorer: SmolLM2 learns chain_sum on a CPU (docs/models.md has the run).

    pip install 'rlvr[gym]'
    python examples/reasoning_gym_task.py
    python examples/reasoning_gym_task.py --model tiny --max-steps 2
"""

import argparse

from rlvr import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=40)
parser.add_argument("--output-dir", default="runs/examples/reasoning_gym")
args = parser.parse_args()

# the task and, after `?`, its generator's settings; held-out rows come from its test split, never trained on
grpo = GRPO(args.model, train_data="reasoning_gym:chain_sum?max_terms=2", max_steps=args.max_steps,
            output_dir=args.output_dir, data={"eval_size": 40})
summary = grpo.train()
print("held-out accuracy before:", summary["before"]["strict"]["mean"], "after:", summary["after"]["strict"]["mean"])
