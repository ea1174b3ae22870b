"""Reward models: a learned reward where no verifier exists (a complement to rlvr.rewards).

A Bradley–Terry reward model is a sequence-classification head (one output) on a language model,
trained on preference pairs so that the chosen completion scores above the rejected one::

    rlvr rm --data pairs.jsonl --model tiny            # writes runs/reward_model/
    rewards: [{name: reward_model, params: {path: runs/reward_model}}]   # in a GRPO config

- pairs.py: `load_pairs` from JSONL (prompt, chosen, rejected) and the seeded held-out split
- bradley_terry.py: `bradley_terry_loss`, `pairwise_accuracy` (pure tensor maths)
- train.py: `RewardModelTrainer`, a recipe of the run core, and `train_reward_model(config, resume=...)`
- cli.py: ``rlvr rm``

The model itself (loading a one-output classifier, scoring text, the score statistics) is
rlvr.models.reward_model; using it as a reward or a best-of-N scorer is rlvr.rewards.reward_model.
Nothing heavy is imported here, so ``rlvr`` starts fast whichever command it runs.
"""
