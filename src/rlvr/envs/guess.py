"""`guess_number`: a game with feedback. The environment thinks of a number; the model guesses, in
\\boxed{}, and hears "higher" or "lower" until it finds it or runs out of turns.

Reward (the environment's own): 1 for finding it, less the share of turns used beyond the first
(1 - 0.5 · (turns - 1) / (max_turns - 1), so a quicker find is worth more); 0 when the turns run out.
The number is the row's `secret` column when it has one, else drawn from the trajectory's seed.
"""

from __future__ import annotations

import random
import re
from typing import Any

from rlvr.envs.base import Message, Reply

_BOXED_INT = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")


def last_boxed_int(text: str) -> int | None:
    """
    >>> last_boxed_int("maybe \\\\boxed{40}, no: \\\\boxed{ 55 }"), last_boxed_int("fifty")
    (55, None)
    """
    found = _BOXED_INT.findall(text)
    return int(found[-1]) if found else None


class GuessNumber:
    def __init__(self, low: int = 1, high: int = 100, max_turns: int = 8):
        self.low, self.high, self.max_turns = low, high, max_turns
        self.secret, self.turns = low, 0

    def reset(self, row: dict[str, Any], messages: list[Message], seed: int) -> list[Message]:
        self.secret = int(row["secret"]) if "secret" in row else random.Random(seed).randint(self.low, self.high)
        self.turns = 0
        rules = (f"I am thinking of a whole number from {self.low} to {self.high}. Guess it: answer with one "
                 f"number in \\boxed{{}}, and I will say whether mine is higher or lower. You have "
                 f"{self.max_turns} guesses.")
        return [*messages, {"role": "user", "content": rules}] if not messages else [
            *messages[:-1], {"role": messages[-1]["role"], "content": messages[-1]["content"] + "\n\n" + rules}]

    def step(self, text: str) -> Reply:
        self.turns += 1
        guess = last_boxed_int(text)
        if guess == self.secret:
            share = (self.turns - 1) / max(self.max_turns - 1, 1)
            return Reply(message=None, done=True, reward=1.0 - 0.5 * share, info={"guesses": 1.0})
        if self.turns >= self.max_turns:
            return Reply(message=None, done=True, reward=0.0, info={"guesses": 1.0})
        feedback = ("Give one whole number in \\boxed{}." if guess is None
                    else "Higher." if self.secret > guess else "Lower.")
        return Reply(message={"role": "user", "content": feedback}, done=False, info={"guesses": 1.0})
