"""PPO with a learned critic and GAE: the baseline GRPO removes (DeepSeekMath §4.1), on rlvr's own rollout,
rewards and update code, so that the two can be compared on the same job (bench/ppo_vs_grpo.py)."""
