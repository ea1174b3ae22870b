"""Tinker's training API served by rlvr (`rlvr serve --tinker`): loops written for the `tinker` SDK run on this
machine, on rlvr's models, losses and sampler (docs/tinker.md).

    wire.py      the SDK's protobuf and JSON as rlvr's records
    losses.py    Tinker's built-in losses on rlvr's objectives (summed per datum)
    training.py  a training client's model: base + LoRA, AdamW, checkpoints
    sampling.py  a sampling client's snapshot, sampled by rlvr's engine
    service.py   sessions, models, samplers and the futures of their work
    server.py    the HTTP server the SDK talks to
"""
