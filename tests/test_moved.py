"""A checkpoint written before a module moved still loads: its pickle names the old path (rlvr.moved)."""

import sys
import types

import torch

from rlvr import intact
from rlvr.rl.ahead import Sampled
from rlvr.run.checkpoint import load_state


def saved_under(path, module: str, obj) -> None:
    """torch.save of `obj` as an rlvr of before the move wrote it: its class found at `module`."""
    cls, real = type(obj), type(obj).__module__
    parent = module.rpartition(".")[0]
    fakes = {parent: types.ModuleType(parent), module: types.ModuleType(module)}
    setattr(fakes[module], cls.__name__, cls)
    sys.modules.update(fakes)
    cls.__module__ = module
    try:
        torch.save({"step": 3, "ahead": {"pending": [obj]}}, path)
    finally:
        cls.__module__ = real
        for name in fakes:
            del sys.modules[name]


def test_a_trainer_state_pickled_under_rlvr_train_loads(tmp_path):
    pending = Sampled(batch=4, version=3, result=None, stream_state={"epoch": 0})
    saved_under(tmp_path / "trainer.pt", "rlvr.train.ahead", pending)
    assert "rlvr.train" not in sys.modules
    state = load_state(tmp_path)
    assert state["ahead"]["pending"] == [pending] and type(state["ahead"]["pending"][0]) is Sampled
    assert intact._torch_problem(tmp_path / "trainer.pt", tmp_path) is None  # (the resume's check reads it too)
