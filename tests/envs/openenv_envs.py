"""An OpenEnv environment written as openenv-core's users write one: typed action and observation, reset / step."""

import random

from openenv.core import Action, Environment, Observation, State
from openenv.core.env_server.mcp_environment import MCPEnvironment


class GuessAction(Action):
    guess: str


class GuessObservation(Observation):
    feedback: str = ""


class NumberGuess(Environment):
    """Guess a number from 0 to 9 (seeded); each step's reward is 1.0 on the right number, which ends the game."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    alive = 0  # instances built and not yet closed, in this process

    def __init__(self, max_tries: int = 3):
        super().__init__()
        NumberGuess.alive += 1
        self.max_tries, self.secret, self.tries = max_tries, 0, 0
        self._state = State()

    def reset(self, seed=None, episode_id=None, **kwargs) -> GuessObservation:
        self.secret, self.tries = random.Random(seed).randrange(10), 0
        return GuessObservation(feedback="Guess a digit from 0 to 9.")

    def step(self, action: GuessAction, timeout_s=None, **kwargs) -> GuessObservation:
        self.tries += 1
        digits = [c for c in action.guess if c.isdigit()]
        right = bool(digits) and int(digits[0]) == self.secret
        done = right or self.tries >= self.max_tries
        if right:
            return GuessObservation(feedback="right", done=True, reward=1.0)
        hint = "no digit" if not digits else ("higher" if int(digits[0]) < self.secret else "lower")
        return GuessObservation(feedback=hint, done=done, reward=0.0)

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        NumberGuess.alive -= 1


def serve(port, sessions=64):
    """The same environment behind openenv-core's server (as `uvicorn` would run it), `sessions` at most at once."""
    import uvicorn
    from openenv.core import create_app

    app = create_app(NumberGuess, GuessAction, GuessObservation, max_concurrent_envs=sessions)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    import sys

    serve(*map(int, sys.argv[1:]))


class Calculator(MCPEnvironment):
    """An OpenEnv MCPEnvironment as openenv-core's docs write one: a FastMCP server's tools behind step()."""

    def __init__(self):
        from fastmcp import FastMCP

        tools = FastMCP("calculator")

        @tools.tool()
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        super().__init__(tools)
        self._state = State(episode_id="calculator", step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        return Observation(done=False, reward=0.0)

    def _step_impl(self, action, timeout_s=None, **kwargs):
        return Observation(done=True, reward=0.0)

    @property
    def state(self):
        return self._state
