"""How SmolLM2 does on arithmetic before any training, by the example exchange shown: the measurement that
chose configs/addition.yaml (a task where the answer itself must improve, not only its format).

    .venv/bin/python bench/arithmetic_baselines.py [--limit 100] [--samples 8] [--max-new-tokens 64] [--model smollm2]

For each (difficulty, example exchange): greedy strict and lenient accuracy on the first `limit` held-out
problems, and sampled at temperature 1.0 (as the job trains) the mean accuracy and pass@`samples` — the
room GRPO has to sharpen: a problem solved by none of the samples gives its group no signal.
Decoding is Hugging Face `generate` (rlvr's engine gives the same greedy tokens; tests/test_rollout.py).
"""

from __future__ import annotations

import argparse
import time

import torch
from machine import machine_line

from rlvr.data import load_examples, render_prompt, with_few_shot
from rlvr.models.loading import load_model
from rlvr.rewards.loading import load_reward_function

ASK = " Put your final answer in \\boxed{}."
# (difficulty, name, example exchange)
CASES = [
    (2, "bare box (the default job's)", ("What is 10 + 10?" + ASK, "\\boxed{20}")),
    (2, "restate the sum", ("What is 23 + 45?" + ASK, "23 + 45 = 68. \\boxed{68}")),
    (2, "split into tens and ones", ("What is 23 + 45?" + ASK, "23 + 45 = 20 + 40 + 3 + 5 = 60 + 8 = 68. \\boxed{68}")),
    (2, "tens, ones, total", ("What is 27 + 48?" + ASK,
                              "Tens: 20 + 40 = 60. Ones: 7 + 8 = 15. Total: 60 + 15 = 75. \\boxed{75}")),
    (3, "restate the product", ("What is 23 * 4?" + ASK, "23 * 4 = 92. \\boxed{92}")),
]


def completions(model, tokenizer, texts: list[str], *, samples: int, max_new_tokens: int) -> list[str]:
    """Greedy completions (samples = 0) or `samples` sampled ones per text, in order."""
    out = []
    for i in range(0, len(texts), 25):
        batch = tokenizer(texts[i:i + 25], return_tensors="pt", padding=True, add_special_tokens=False)
        sampled = {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0} if samples else {"do_sample": False}
        with torch.no_grad():
            ids = model.generate(**batch, max_new_tokens=max_new_tokens, num_return_sequences=max(samples, 1),
                                 pad_token_id=tokenizer.pad_token_id, **sampled)
        out += tokenizer.batch_decode(ids[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--model", default="smollm2", help="the model measured (`tiny`: the random test model)")
    args = p.parse_args()
    torch.manual_seed(0)
    model, tokenizer = load_model(args.model)
    model.eval()
    tokenizer.padding_side = "left"
    strict, lenient = load_reward_function("math_accuracy"), load_reward_function("math_accuracy_lenient")
    print(machine_line("float32"))
    print(f"| difficulty | example exchange | greedy strict | greedy lenient | sampled mean strict | "
          f"pass@{args.samples} strict | seconds |\n|---|---|---|---|---|---|---|")
    for difficulty, name, shot in CASES:
        started = time.perf_counter()
        examples = load_examples("arithmetic", split="test", limit=args.limit, difficulty=difficulty)
        texts = [render_prompt(with_few_shot(e.prompt, [shot]), template="chat", tokenizer=tokenizer) for e in examples]
        answers = [str(e.columns["answer"]) for e in examples]
        greedy = completions(model, tokenizer, texts, samples=0, max_new_tokens=args.max_new_tokens)
        g_strict, g_lenient = strict(greedy, answer=answers), lenient(greedy, answer=answers)
        row = [f"{100 * sum(g_strict) / len(answers):.1f}%", f"{100 * sum(g_lenient) / len(answers):.1f}%"]
        if args.samples:
            drawn = completions(model, tokenizer, texts, samples=args.samples, max_new_tokens=args.max_new_tokens)
            scores = strict(drawn, answer=[a for a in answers for _ in range(args.samples)])
            solved = [any(scores[i * args.samples:(i + 1) * args.samples]) for i in range(len(answers))]
            row += [f"{100 * sum(scores) / len(scores):.1f}%", f"{100 * sum(solved) / len(solved):.1f}%"]
        else:
            row += ["–", "–"]
        print(f"| {difficulty} | {name}: {shot[1]!r} | {' | '.join(row)} | {time.perf_counter() - started:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
