"""GRPO (`rlvr train`): the step is the algorithm, each stage a module.

    prompts.py, curriculum.py   which prompts each step samples (shuffled epochs, or by pass rate)
    sampling.py, dynamic.py     steps 1-2: G completions per prompt, scored as each group finishes;
                                DAPO's dynamic sampling refills groups without reward spread
    batch.py                    step 3-4: group-relative advantages, micro-batches, log π_old and log π_ref
    process.py                  per-token advantages from a process reward model
    update.py                   step 5: the clipped surrogate + β·KL and the optimizer step
    metrics.py                  what a step reports
    build.py                    models, prompts and rewards from the config
    trainer.py                  Trainer.step() and train_grpo(config, resume=...)
    cli.py                      `rlvr train`

Nothing is imported here, so `rlvr` starts fast whichever command it runs: import
rlvr.train.trainer for `Trainer` and `train_grpo`.
"""
