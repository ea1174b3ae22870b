"""The ecosystem's environments, unchanged: what rlvr makes of them.

    verifiers_env.py  verifiers 0.3 environments (`verifiers:<module>`): their dataset, rollout() and rubric,
                      run as harness agents (rlvr.harness) through the policy's endpoint

OpenEnv environments are driven as rlvr's own are (rlvr.envs.openenv).
"""
