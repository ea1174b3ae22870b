"""PPO with a learned critic and GAE: the baseline GRPO removes (DeepSeekMath §4.1), a peer of GRPO on the
policy-RL core (rlvr.rl: rollouts, rewards, the update), so that the two can be compared on the same job
(bench/ppo_vs_grpo.py)."""
