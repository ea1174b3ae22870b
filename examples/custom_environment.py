"""A multi-turn environment of your own: the model plays hangman, one letter a turn; the environment answers
each guess and scores the conversation itself (read by the `environment_reward` reward).

    python examples/custom_environment.py
    python examples/custom_environment.py --model tiny --max-steps 2
"""

import argparse

from rlvr import GRPO, Reply

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=10)
parser.add_argument("--output-dir", default="runs/examples/environment")
args = parser.parse_args()


class Hangman:
    """One object per conversation: reset() with the row, then step() for each of the model's messages."""

    def reset(self, row, messages, seed):
        self.word, self.guessed = row["word"], set()
        return messages  # the conversation's opening messages: the prompt's, as they are

    def step(self, text):
        letter = text.strip()[:1].lower()
        self.guessed.add(letter)
        shown = " ".join(c if c in self.guessed else "_" for c in self.word)
        if "_" not in shown:
            return Reply(message=None, done=True, reward=1.0)  # found: the trajectory's reward
        return Reply(message={"role": "user", "content": f"{shown}. Next letter?"}, done=False,
                     info={"hits": float(letter in self.word)})  # summed per conversation: env/hits


words = ["cat", "dog", "sun", "map", "pen", "cup", "hat", "box"]
rows = [{"prompt": "Guess my 3-letter word: answer with one letter a turn.", "word": w} for w in words * 8]
grpo = GRPO(args.model, rewards=["environment_reward"], train_data=rows, environment=Hangman,
            max_steps=args.max_steps, output_dir=args.output_dir, eval_before=False, eval_after=False,
            config={"environment": {"max_turns": 6, "max_tokens": 256}, "generation": {"max_new_tokens": 8},
                    "sampling": {"group_size": 4, "batch_size": 32}})
grpo.train()  # metrics.jsonl: env/turns, env/hits, env/cut_before_reply beside the rewards
