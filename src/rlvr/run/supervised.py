"""What the supervised recipes share (SFT, rlvr.sft; reward models, rlvr.reward_models): a fixed set of training
rows, a plan of steps drawn from it, each rank's share of a step's rows, AdamW and its schedule, and their state.

    rows ─▶ plan (batch_order: a pure function of the seed, the number of rows, batch_size and the steps)
         ─▶ this rank's share of step t's rows ─▶ the recipe's loss ─▶ AdamW step

A subclass loads its rows and model, calls `plan_steps`, and writes its own `step()` (the loss), `evaluate()`,
`progress()` and what a checkpoint holds beyond the optimizer's state.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar

import torch

from rlvr.config import RewardModelConfig, SFTConfig
from rlvr.config.sections import shards
from rlvr.distributed.world import SINGLE, World, shard
from rlvr.errors import UserError
from rlvr.optim import build_optimizer, load_schedule
from rlvr.run.loop import Schedule
from rlvr.run.order import batch_order


def rows_digest(rows: list[Any]) -> str:
    """A fingerprint of the training rows (JSON-able): the same rows, in the same order, give the same one.

    >>> rows_digest([([1, 2], [-100, 2])]) == rows_digest([([1, 2], [-100, 2])]) != rows_digest([([1, 3], [-100, 3])])
    True
    """
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


class SupervisedRecipe:
    """A recipe over a fixed list of training rows (`rows` of them, called `unit` in its messages)."""

    command: ClassVar[str]  # how a user runs it: "rlvr sft"
    unit: ClassVar[str]  # what its rows are called: "rows", "pairs"
    state_key: ClassVar[str]  # the key its checkpoints keep the row count under
    same_rows: ClassVar[str]  # what resuming needs to give the same rows: "the same data and eval_fraction"

    world: World = SINGLE
    step_count: int = 0

    def refuse_sharding(self, strategy: str, world: World) -> None:
        """These recipes replicate the model on every rank (DDP): a sharded strategy is one line."""
        if shards(strategy, world.size):
            raise UserError(f"distributed.strategy={strategy} is built for rlvr train so far: run {self.command} "
                            "with distributed.strategy=ddp")

    def plan_steps(self, model: torch.nn.Module, config: SFTConfig | RewardModelConfig, rows: int,
                   digest: str | None = None) -> None:
        """The steps (max_steps, or as many as `epochs` passes over the `rows` take), the optimizer and its
        schedule over them, each step's rows, and when the loop saves, evaluates and drops old checkpoints (the
        run section's settings: rlvr.config.run)."""
        c = config
        steps = c.max_steps or c.epochs * -(-rows // c.batch_size)
        self.rows, self.digest = rows, digest  # (`digest`: of the training rows' content, checked at resume)
        self.optimizer, self.scheduler = build_optimizer(model, c.optim, steps)
        self.plan = batch_order(rows, c.batch_size, steps, c.seed)  # each step's rows
        self.schedule = Schedule(steps, save_every=c.save_every, eval_every=c.eval_every,
                                 keep_checkpoints=c.keep_checkpoints)
        self.step_count = 0

    def my_share(self) -> tuple[list[int], float]:
        """This rank's rows of the current step, and their weight: 1, or 0 for a rank whose share is empty (more
        ranks than rows), which runs the step's first row weighted 0 so that it still meets the all-reduce."""
        chosen = self.plan[self.step_count]
        if self.world.rank < len(chosen):
            return shard(chosen, self.world), 1.0
        return chosen[:1], 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                self.state_key: self.rows, "rows_digest": self.digest}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state[self.state_key] != self.rows:
            raise UserError(f"cannot resume: the run trained on {state[self.state_key]} {self.unit} and the data now "
                            f"gives {self.rows}; resume with {self.same_rows}")
        if state.get("rows_digest") not in (None, self.digest):  # (a checkpoint from before the digest: unchecked)
            raise UserError(f"cannot resume: the data gives {self.rows} {self.unit} as the run's did, but not the same "
                            f"ones (edited since?); resume with {self.same_rows}")
        self.optimizer.load_state_dict(state["optimizer"])
        load_schedule(self.scheduler, state["scheduler"])  # (more steps given: the longer schedule)
        self.step_count = state["step"]
