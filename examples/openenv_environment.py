"""An OpenEnv environment (openenv-core: typed actions and observations, reset / step) as a multi-turn environment:
the model's message is the action, the observation the next message, the episode's reward the trajectory's.
A running OpenEnv server works the same way: environment.name: openenv:http://host:port.

    pip install 'openenv-core==0.3.0'
    python examples/openenv_environment.py
    python examples/openenv_environment.py --model tiny --max-steps 2
"""

import argparse
import random

from openenv.core import Action, Environment, Observation, State

from rlvr import GRPO

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2")
parser.add_argument("--max-steps", type=int, default=10)
parser.add_argument("--output-dir", default="runs/examples/openenv")
args = parser.parse_args()


class Guess(Action):
    guess: str  # the action's one text field: the model's message fills it


class Feedback(Observation):
    feedback: str = ""


class NumberGuess(Environment):
    """Guess a digit (seeded per trajectory); reward 1 when found."""

    def __init__(self, max_tries: int = 3):
        super().__init__()
        self.max_tries = max_tries

    def reset(self, seed=None, episode_id=None, **kwargs) -> Feedback:
        self.secret, self.tries = random.Random(seed).randrange(10), 0
        return Feedback(feedback="Guess a digit from 0 to 9. Answer with the digit only.")

    def step(self, action: Guess, timeout_s=None, **kwargs) -> Feedback:
        self.tries += 1
        digits = [int(c) for c in action.guess if c.isdigit()]
        if digits and digits[0] == self.secret:
            return Feedback(feedback="right", done=True, reward=1.0)
        hint = "a digit, please" if not digits else ("higher" if digits[0] < self.secret else "lower")
        return Feedback(feedback=hint, done=self.tries >= self.max_tries, reward=0.0)

    @property
    def state(self) -> State:
        return State()


rows = [{"prompt": "Let's play a game."}] * 32
grpo = GRPO(args.model, rewards=["environment_reward"], train_data=rows, environment=NumberGuess,
            max_steps=args.max_steps, output_dir=args.output_dir, eval_before=False, eval_after=False,
            config={"environment": {"max_turns": 3, "max_tokens": 256, "reply_to_cut": True},
                    "generation": {"max_new_tokens": 8}, "sampling": {"group_size": 4, "batch_size": 16}})
grpo.train()  # metrics.jsonl: env/turns, env/invalid_actions beside the rewards
