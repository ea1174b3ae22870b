"""Evaluate any model on your own task with your own verifier: pass@1, pass@k and greedy accuracy with 95%
intervals, the samples and a report written to a folder (the same as `rlvr eval --reward file.py:fn`).

    python examples/evaluate_your_verifier.py
    python examples/evaluate_your_verifier.py --model tiny --samples 2
"""

import argparse

from rlvr import evaluate_model

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--samples", type=int, default=8)
parser.add_argument("--output-dir", default="runs/examples/evaluation")
args = parser.parse_args()

capitals = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Egypt": "Cairo", "Peru": "Lima",
            "Kenya": "Nairobi", "Canada": "Ottawa", "Spain": "Madrid"}
rows = [{"prompt": f"What is the capital of {country}? Answer in one word.", "capital": city}
        for country, city in capitals.items()]


def names_the_capital(completions, capital, **kwargs):
    """1.0 when the answer names the capital; from 0.5 up counts as correct below (correct_at)."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [1.0 if city.lower() in text.lower() else 0.0 for text, city in zip(texts, capital)]


results = evaluate_model(args.model, rows, reward=names_the_capital, correct_at=0.5, samples=args.samples,
                         output_dir=args.output_dir, max_new_tokens=16)
strict = results["strict"]
print(f"greedy {strict['greedy']['mean']:.2f}, pass@1 {strict['pass@1']['mean']:.2f}, "
      f"pass@{args.samples} {strict['pass@k'][str(args.samples)]:.2f}  ({args.output_dir}/report.md)")
