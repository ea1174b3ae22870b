"""`rlvr sft`: supervised fine-tuning with the loss on completion tokens only (docs/sft.md).

    data.py      rows (prompt/completion or messages) -> checked, split, SFTExample(input_ids, labels)
    masking.py   which tokens are trained: completions / assistant turns and their end-of-turn token
    packing.py   a step's examples -> micro-batches, optionally packed with block-diagonal attention
    loss.py      Σ NLL of the trained tokens; held-out loss
    train.py     SFTTrainer, a recipe of the run core, and train_sft(config, resume=...)
    cli.py       `rlvr sft`

Nothing is imported here, so `rlvr` starts fast whichever command it runs.
"""
