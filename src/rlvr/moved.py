"""Module paths of earlier rlvr versions, as a checkpoint's pickle names them.

trainer.pt is read with `weights_only=False`, and a run sampling ahead keeps its pending batches in it as
objects of rlvr's classes, by their module's path at the time. When a module moves, such a checkpoint still
names the old path: `torch.load(..., pickle_module=rlvr.moved)` reads it through `Unpickler`, which looks each
moved module up at its new place. Add a line to MOVED whenever a module whose objects a checkpoint holds moves.
"""

from __future__ import annotations

import pickle
from typing import Any

# old module path -> new (the policy-RL core left rlvr.train for rlvr.rl and rlvr.grpo in ff5bdce)
MOVED = {
    **{f"rlvr.train.{m}": f"rlvr.rl.{m}" for m in ("ahead", "batch", "dynamic", "prompts", "curriculum", "rollouts")},
    "rlvr.train.trainer": "rlvr.grpo.trainer",
}


class Unpickler(pickle.Unpickler):
    """pickle's Unpickler, finding classes of moved modules at their new place.

    >>> MOVED["rlvr.train.ahead"]
    'rlvr.rl.ahead'
    """

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(MOVED.get(module, module), name)


def load(file: Any, **kwargs: Any) -> Any:  # (what torch.load calls for files of torch's legacy format)
    return Unpickler(file, **kwargs).load()
