"""The run core: what every training loop (GRPO, PPO, SFT, reward models) runs on.

    loop.py        launch / run_training: the loop around a recipe's step, and the Recipe protocol
    directory.py   a fresh run never mixes with an old one; --resume finds the latest checkpoint
    checkpoint.py  atomic checkpoints: models, trainer state, RNG, config
    metrics.py     metrics.jsonl mirrored to TensorBoard, trimmed to the checkpoint on resume
    stop.py        the first Ctrl-C finishes the step and saves; the second aborts
    clock.py       Stopwatch: wall time per phase of a step
    process.py     threads and the global seed
    order.py       a resumable order of examples (SFT, reward models)
    options.py     the command-line options every training command shares
    supervised.py  SupervisedRecipe: what SFT and reward-model training share (rows, plan, share, optimizer)

Nothing is imported here, so `rlvr` parses its arguments before loading torch: import from the modules.
"""
