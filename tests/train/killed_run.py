"""`rlvr train ARGS`, SIGKILLed at one point of one step: python killed_run.py POINT STEP ARGS...

Points: decode (the third token of the rollout), reward (as the rewards are computed), update (gradients
taken, before the optimizer moves the weights), checkpoint (the weights and trainer state written into the
temporary folder, before it is renamed into place), metrics (half of the step's metrics.jsonl line written).
Used by tests/train/test_kill_points.py; nothing else imports it.
"""

import os
import signal
import sys

import torch

import rlvr.grpo.trainer
import rlvr.rl.rollouts
import rlvr.rl.sampling
import rlvr.rollout
import rlvr.run.checkpoint
import rlvr.run.metrics
from rlvr.cli import main

POINT, STEP = (sys.argv[1], int(sys.argv[2])) if __name__ == "__main__" else ("", 0)
running = [0]  # the step in progress (1-based)
tokens = [0]


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def at(point, original, before=None):
    """`original`, wrapped so that the process dies when called at POINT during step STEP, or the first time after
    it: a worker sampling ahead may score the next batch before the main thread has begun the step it is for."""
    def wrapper(*args, **kwargs):
        if point == POINT and running[0] >= STEP and (before is None or before()):
            die()
        return original(*args, **kwargs)
    return wrapper


step = rlvr.grpo.trainer.Trainer.step


def counted_step(self):
    running[0] = self.step_count + 1
    return step(self)


def third_token():
    tokens[0] += 1
    return tokens[0] == 3


def half_a_line(self, step_, metrics):
    if POINT == "metrics" and step_ == STEP:
        self._file.write(f'{{"step": {step_}, "loss": 0.1')
        self._file.flush()
        die()
    return write(self, step_, metrics)


write = rlvr.run.metrics.MetricsWriter.write

if __name__ == "__main__":  # (pytest imports this file for its doctests: nothing is patched then)
    rlvr.grpo.trainer.Trainer.step = counted_step
    rlvr.rollout.sample_next = at("decode", rlvr.rollout.sample_next, third_token)
    rlvr.rl.rollouts.score_rollout = at("reward", rlvr.rl.rollouts.score_rollout)
    rlvr.rl.sampling.compute_rewards = at("reward", rlvr.rl.sampling.compute_rewards)  # (group by group)
    torch.optim.AdamW.step = at("update", torch.optim.AdamW.step)
    rlvr.run.checkpoint.save_config = at("checkpoint", rlvr.run.checkpoint.save_config)
    rlvr.run.metrics.MetricsWriter.write = half_a_line
    sys.exit(main(sys.argv[3:]))
