"""Reward models: a learned reward where no verifier exists (a complement to rlvr.rewards).

A Bradley–Terry reward model is a sequence-classification head (one output) on a language model,
trained on preference pairs so that the chosen completion scores above the rejected one::

    rlvr rm --data pairs.jsonl --model tiny            # writes runs/reward_model/
    rewards: [{name: reward_model, params: {path: runs/reward_model}}]   # in a GRPO config

- pairs.py: `load_pairs` from JSONL (prompt, chosen, rejected) and the seeded held-out split
- bradley_terry.py: `bradley_terry_loss`, `pairwise_accuracy` (pure tensor maths)
- model.py: loading a one-output classifier (`tiny`, `smollm2`, a directory), rendering and scoring text
- stats.py: the mean and std of training scores saved with each checkpoint, for normalisation
- train.py: `train_reward_model(config)`, the loop, checkpoints and summary.json
- scoring.py: `RewardModelScorer` (outcome scores) and `ProcessRewardScorer` (product of step probabilities)
- reward.py: the built-in GRPO reward `reward_model` (normalised scores, one model per path)
- cli.py: ``rlvr rm``

Nothing heavy is imported here, so ``rlvr`` starts fast whichever command it runs.
"""
