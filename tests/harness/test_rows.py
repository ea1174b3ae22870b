"""rlvr.harness.rows: a rollout's turns as training rows, by ids: every sampled token trained once, as sampled."""

import random

from rlvr.harness.recorder import Turn
from rlvr.harness.rows import segments


def turn(prompt, sampled, finish="stop"):
    return Turn(list(prompt), list(sampled), [-0.1 * (i + 1) for i in range(len(sampled))], 0, finish, {})


def test_turns_that_extend_each_other_make_one_row_the_gaps_context():
    p, a, b, c, d, e = [1, 2], [3, 4], [5], [6, 7], [8, 9], [10]
    rows = segments([turn(p, a), turn(p + a + b, c), turn(p + a + b + c + d, e, "length")])
    assert len(rows) == 1
    row = rows[0]
    assert row.prompt_ids == p and row.ids == a + b + c + d + e and row.turns == 3 and row.truncated
    assert row.model_mask == [True, True, False, True, True, False, False, True]
    assert [lp for lp, m in zip(row.logprobs, row.model_mask) if not m] == [0.0, 0.0, 0.0]
    assert [t for t, m in zip(row.ids, row.model_mask) if m] == a + c + e


def test_a_rewritten_history_and_a_second_choice_open_rows_of_their_own():
    p, a, b, c = [1, 2], [3, 4], [5], [6]
    first, other_choice = turn(p, a), turn(p, [9, 9])
    continued = turn(p + a + b, c)
    summarised = turn([1, 42], [7])  # (the agent rewrote its context: no row begins it)
    from_the_other = turn([*p, 9, 9, *b], [8])
    rows = segments([first, other_choice, continued, summarised, from_the_other])
    assert [(r.prompt_ids, r.ids) for r in rows] == [(p, a + b + c), (p, [9, 9, 5, 8]), ([1, 42], [7])]
    late = segments([first, continued, turn(p + a + b, [0])])  # a second continuation of a row already extended
    assert [(r.prompt_ids, r.ids, r.model_mask) for r in late][1] == (p + a + b, [0], [True])


def test_every_sampled_token_is_trained_once_in_order_whatever_the_agent_does():
    """Random agents (continuing one of their conversations, rewriting, branching): each turn's prompt and sampled
    ids are a prefix of its row, and the model tokens of the rows are exactly the turns' sampled ids."""
    rng = random.Random(0)
    for _ in range(200):
        conversations, turns = [], []
        for _ in range(rng.randint(1, 8)):
            if conversations and rng.random() < 0.7:
                base = rng.choice(conversations)
                prompt = base + [rng.randint(100, 199) for _ in range(rng.randint(0, 3))]  # (a tool result)
            else:
                prompt = [rng.randint(200, 299) for _ in range(rng.randint(1, 4))]  # (a new or rewritten history)
            sampled = [rng.randint(0, 99) for _ in range(rng.randint(1, 4))]
            turns.append(turn(prompt, sampled))
            conversations.append(prompt + sampled)
        rows = segments(turns)
        model = sorted(tuple(t for t, m in zip(r.ids, r.model_mask) if m) for r in rows)
        assert sum(len(x) for x in model) == sum(len(t.token_ids) for t in turns)
        for t in turns:
            assert any(r.whole[:len(t.prompt_ids) + len(t.token_ids)] == t.prompt_ids + t.token_ids
                       and len(r.prompt_ids) <= len(t.prompt_ids) for r in rows)
        for r in rows:
            assert len(r.ids) == len(r.model_mask) == len(r.logprobs)
