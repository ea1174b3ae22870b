"""Run tinker-cookbook's own `recipes/sl_loop.py` or `recipes/rl_loop.py`, unchanged, against `rlvr serve --tinker`
on this machine, with no network: what the recipes fetch from the Hub is given here instead.

    .venv/bin/python scripts/cookbook_offline.py rl --tokenizer smollm2 --data ../shared/data/gsm8k/train.jsonl \\
        base_url=http://127.0.0.1:8000 model_name=meta-llama/Llama-3.2-1B batch_size=8 group_size=8 ...

Three lookups of the recipes go to the Hub, and are answered locally (the recipes' code is not edited):
- the tokenizer of `model_name` (tinker_cookbook.tokenizer_utils.get_tokenizer): `--tokenizer`'s, a model rlvr loads
  (tiny, smollm2, a folder), registered under that name;
- the renderer of `model_name` (tinker_cookbook.model_info's table of Hub names): pick a name the table knows (e.g.
  meta-llama/Llama-3.2-1B, a base model: the `role_colon` renderer, which any tokenizer can write) and have the
  server load your model under it (`rlvr serve --tinker --alias meta-llama/Llama-3.2-1B=smollm2`);
- the dataset (datasets.load_dataset("openai/gsm8k") or ("HuggingFaceH4/no_robots")): the rows of `--data`, a JSONL
  file; rows of question and answer become a user's and an assistant's message for the SL loop.
Every other argument (key=value) goes to the recipe's own config, as on its command line. TINKER_API_KEY defaults to
"tml-local" (the SDK wants the form; the server checks nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def rows(path: Path, recipe: str) -> list[dict[str, object]]:
    """The JSONL rows the recipe reads: the SL loop's conversations from question and answer where rows have no
    messages; the RL loop's rows as they are (question, answer ending in #### N)."""
    data = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if recipe == "sl":
        return [r if "messages" in r else {"messages": [{"role": "user", "content": r["question"]},
                                                        {"role": "assistant", "content": r["answer"]}]}
                for r in data]
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", choices=["sl", "rl"])
    parser.add_argument("--tokenizer", required=True, help="a model rlvr loads whose tokenizer the recipe uses")
    parser.add_argument("--data", required=True, type=Path, help="the training rows, JSONL")
    args, recipe_args = parser.parse_known_args()
    os.environ.setdefault("TINKER_API_KEY", "tml-local")

    import chz
    import datasets
    from tinker_cookbook import tokenizer_utils
    from tinker_cookbook.recipes import rl_loop, sl_loop

    from rlvr.models.loading import load_model

    recipe = sl_loop if args.recipe == "sl" else rl_loop
    model_name = next((a.split("=", 1)[1] for a in recipe_args if a.startswith("model_name=")),
                      recipe.Config.__chz_fields__["model_name"]._default)
    tokenizer = load_model(args.tokenizer)[1]
    tokenizer_utils.register_tokenizer(model_name, lambda: tokenizer)
    train = datasets.Dataset.from_list(rows(args.data, args.recipe))
    datasets.load_dataset = lambda *a, **k: datasets.DatasetDict({"train": train})
    sys.argv = [sys.argv[0], *recipe_args]
    chz.nested_entrypoint(recipe.main)


if __name__ == "__main__":
    main()
