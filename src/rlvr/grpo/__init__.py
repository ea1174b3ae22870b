"""GRPO (`rlvr train`): the step is the algorithm (DeepSeekMath Algorithm 1), on the policy-RL core (rlvr.rl).

    trainer.py   Trainer.step() and train_grpo(config, resume=...)
    process.py   per-token advantages from a process reward model (DeepSeekMath §4.1.3)
    cli.py       `rlvr train`

Nothing is imported here, so `rlvr` starts fast whichever command it runs: import rlvr.grpo.trainer for
`Trainer` and `train_grpo`.
"""
