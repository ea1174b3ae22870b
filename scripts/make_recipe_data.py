"""Write the small example datasets the recipes use (recipes/data/); run once, the output is committed.

    python scripts/make_recipe_data.py

cold_start.jsonl   prompt/completion pairs with a short worked answer (the cold-start SFT format)
preferences.jsonl  prompt/chosen/rejected pairs: a boxed, right answer preferred to a bare or wrong one
mixed.jsonl        stage-4 prompts: arithmetic (kind: reasoning, with answer) and open requests (kind: general)
countdown_worked.jsonl  countdown puzzles (difficulty 1) with a solver's worked solution (configs/countdown_sft.yaml)
All problems come from their task's train split, so none of them is in the held-out evaluation.
"""

import json
import random
from pathlib import Path

from rlvr.data.tasks import arithmetic, countdown

OUT = Path(__file__).resolve().parents[1] / "recipes" / "data"
GENERAL = ["Write a one-line greeting.", "Name a colour.", "Say something kind.", "Describe the sky in three words.",
           "Give a short tip for sleeping well.", "Name a fruit.", "Say thank you politely.", "Suggest a name for a cat."]
COUNTDOWN_ROWS, COUNTDOWN_SEED = 3000, 7  # configs/countdown_sft.yaml trains on 40 steps of 32 of them


def write(name: str, rows: list[dict]) -> None:
    (OUT / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    problems = arithmetic.generate(64, split="train", seed=0, difficulty=1)
    write("cold_start.jsonl", [
        {"prompt": p["prompt"], "completion": f"{p['prompt'].split('?')[0].removeprefix('What is ')} = {p['answer']}. \\boxed{{{p['answer']}}}"}
        for p in problems[:48]
    ])
    write("preferences.jsonl", [
        {"prompt": p["prompt"], "chosen": f"\\boxed{{{p['answer']}}}",
         "rejected": rng.choice([p["answer"], f"\\boxed{{{int(p['answer']) + rng.randint(1, 5)}}}"])}
        for p in problems[:48]
    ])
    write("mixed.jsonl", [
        *({"prompt": p["prompt"], "answer": p["answer"], "kind": "reasoning"} for p in problems[48:64]),
        *({"prompt": g, "answer": None, "kind": "general"} for g in GENERAL),
    ])
    write("countdown_worked.jsonl", [
        {"prompt": p["prompt"], "completion": countdown.worked(p["numbers"], p["target"])}
        for p in countdown.generate(COUNTDOWN_ROWS, split="train", seed=COUNTDOWN_SEED, difficulty=1)
    ])


if __name__ == "__main__":
    main()
