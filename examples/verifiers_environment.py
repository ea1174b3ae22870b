"""A verifiers environment, trained unchanged: its dataset, its rollout, its rubric (weighted reward functions and
a group reward). Installed ones load by name as well: environment.name: verifiers:<module>.

    pip install 'verifiers==0.3.1' openai
    python examples/verifiers_environment.py
    python examples/verifiers_environment.py --model tiny --max-steps 2
"""

import argparse

import verifiers as vf
from datasets import Dataset

from rlvr import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=10)
parser.add_argument("--output-dir", default="runs/examples/verifiers")
args = parser.parse_args()


def correct(completion, answer, **kwargs):
    return float(answer in (completion[-1]["content"] or ""))


def brief(completions, **kwargs):
    """A group reward: 1 for the group's shortest answers."""
    sizes = [len(c[-1]["content"] or "") for c in completions]
    return [float(s == min(sizes)) for s in sizes]


questions = [{"question": f"What is {a} + {b}? Answer with the number.", "answer": str(a + b)}
             for a in range(2, 10) for b in range(1, 5)]
env = vf.SingleTurnEnv(dataset=Dataset.from_list(questions), system_prompt="Answer briefly.",
                       rubric=vf.Rubric(funcs=[correct, brief], weights=[1.0, 0.2]))

grpo = GRPO(args.model, environment=env, max_steps=args.max_steps, output_dir=args.output_dir,
            eval_before=False, eval_after=False,
            config={"generation": {"max_new_tokens": 16}, "sampling": {"group_size": 4, "batch_size": 16}})
grpo.train()  # metrics.jsonl: reward/agent_reward (the rubric's), env/correct, env/brief
