"""Each reward gets its own copy of the inputs: one that edits them in place cannot change what the next sees."""

from rlvr.rewards import RewardSpec, compute_rewards

from ..train import reward_fns


def test_a_reward_that_edits_its_inputs_in_place_does_not_reach_the_next():
    specs = [RewardSpec("blanks", reward_fns.blanks_the_completions, 1.0, None),
             RewardSpec("digits", reward_fns.has_digit, 1.0, None)]
    result = compute_rewards(specs, prompts=["p", "p"], completions=["7", "no"], completion_ids=[[1], [2]], columns={})
    assert result.components["digits"] == [1.0, 0.0]
