"""Tinker's training API served by rlvr (`rlvr serve --tinker`): loops written for the `tinker` SDK run on this
machine, on rlvr's models, losses and sampler (docs/tinker.md). From Python, without starting a server:

    from rlvr.tinker import service_client
    service = service_client("runs/tinker")   # a tinker.ServiceClient on a server in this process

    wire.py      the SDK's protobuf and JSON as rlvr's records
    losses.py    Tinker's built-in losses on rlvr's objectives (summed per datum)
    training.py  a training client's model: base + LoRA, AdamW, checkpoints
    sampling.py  a sampling client's snapshot, sampled by rlvr's engine
    service.py   sessions, models, samplers and the futures of their work
    server.py    the HTTP server the SDK talks to
"""

from typing import Any

__all__ = ["service_client"]


def __getattr__(name: str) -> Any:  # (lazily: `rlvr serve`'s parser imports this package, not torch)
    if name == "service_client":
        from rlvr.tinker.server import service_client

        return service_client
    raise AttributeError(f"module 'rlvr.tinker' has no attribute {name!r}")
