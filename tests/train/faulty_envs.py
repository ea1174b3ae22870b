"""Environments that break the contract or never answer, loaded by file path as a user's would be."""

import os
import sys
import time

from rlvr.envs import Reply


class Answers:
    """One turn: the conversation ends at the model's first message, scored 0.5."""

    def reset(self, row, messages, seed):
        return messages

    def step(self, text):
        return Reply(None, done=True, reward=0.5)


class NanReward(Answers):
    def step(self, text):
        return Reply(None, done=True, reward=float("nan"))


class BlocksInStep(Answers):
    def step(self, text):
        time.sleep(3600)


class BlocksInReset(Answers):
    def reset(self, row, messages, seed):
        time.sleep(3600)


class BlocksWhenTold(Answers):
    """Answers, until the file named by $RLVR_TEST_HANG exists: then step() blocks (saying so in FILE.hanging)."""

    def step(self, text):
        if os.path.exists(os.environ["RLVR_TEST_HANG"]):
            open(os.environ["RLVR_TEST_HANG"] + ".hanging", "w").close()
            time.sleep(3600)
        return super().step(text)


class StepReturnsNone(Answers):
    def step(self, text):
        pass


class StepReturnsText(Answers):
    def step(self, text):
        return "the tool said 4"


class ResetReturnsNone(Answers):
    def reset(self, row, messages, seed):
        pass


class ExitsInStep(Answers):
    def step(self, text):
        sys.exit(5)


class TextReward(Answers):
    def step(self, text):
        return Reply(None, done=True, reward="1.0")


class SwallowsInReset(Answers):
    """reset() waits on something for ever, with a bare `except:` around each wait."""

    def reset(self, row, messages, seed):
        open(os.environ["RLVR_TEST_HANG"] + ".hanging", "w").close()
        while True:
            try:
                time.sleep(1)
            except:  # noqa: E722
                pass
