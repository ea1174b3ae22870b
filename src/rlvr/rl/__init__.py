"""The policy-RL core: what a policy trained on its own scored rollouts needs, whatever its advantages. GRPO
(rlvr.grpo) and PPO (rlvr.ppo) are peers on it, each a `step()` over `recipe.PolicyRecipe`.

    recipe.py                   PolicyRecipe: the run's parts, the policy, its optimizer, the rollout source,
                                evaluation; build.py builds the parts from the config (models, prompts, rewards)
    prompts.py, curriculum.py   which prompts each step samples (shuffled epochs, or by pass rate)
    rollouts.py, sampling.py    steps 1-2: G completions per prompt, scored as each group finishes;
    dynamic.py, ahead.py        DAPO's dynamic sampling refills groups without reward spread; rollouts
                                sampled ahead by a worker thread (sampling.max_staleness)
    batch.py, turns.py          step 3-4: advantages (group-relative, per turn), micro-batches, log π_old and
                                log π_ref
    objective.py, update.py     step 5: the policy-gradient term a config names, + β·KL, and the optimizer step
    metrics.py, evaluation.py   what a step reports; the held-out evaluation (heldout.py: who judges it)
    memory.py, preflight.py     a run's memory planned before the model loads; its first batch read for what
                                dooms it; reward_setup.py: its rewards, set up before the model loads

Nothing is imported here, so `rlvr` starts fast whichever command it runs.
"""
