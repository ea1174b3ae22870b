"""summarise on hand-built records: every number worked out by hand."""

import pytest

from rlvr.evaluate.metrics import best_of_n
from rlvr.evaluate.records import ProblemRecord, SampleRecord
from rlvr.evaluate.summary import curve_points, summarise

BUDGETS = [4, 8]


def sample(ok, answer, score=None, budget=None, tokens=8):
    verdict = {"strict": ok, "lenient": ok}
    return SampleRecord(text="t", tokens=tokens, truncated=False, correct=verdict,
                        answer={"strict": answer, "lenient": answer},
                        budget_correct={m: budget or [ok, ok] for m in ("strict", "lenient")}, score=score)


def settings(n, k, voting=True):
    return {"samples": n, "k": k, "voting": voting, "budgets": BUDGETS, "reward_model": "rm",
            "process_reward_model": None, "template": "chat"}


def problem(i, samples, greedy=None):
    return ProblemRecord(id=f"p{i}", index=i, prompt="q", gold="1", greedy=greedy, samples=samples)


def test_pass_at_k_and_majority_by_hand():
    records = [
        # 2 of 4 right; answers: "1" (right) twice, "2" twice -> 2-2 tie -> maj@4 = 0.5
        problem(0, [sample(1.0, "1"), sample(0.0, "2"), sample(1.0, "1"), sample(0.0, "2")], greedy=sample(1.0, "1")),
        # 0 of 4 right
        problem(1, [sample(0.0, "3"), sample(0.0, "3"), sample(0.0, None), sample(0.0, "4")], greedy=sample(0.0, "3")),
    ]
    s = summarise(records, settings(4, [1, 2, 4]))["strict"]
    assert s["problems"] == 2
    assert s["greedy"]["mean"] == 0.5
    assert s["pass@1"]["mean"] == pytest.approx((0.5 + 0.0) / 2)
    # pass@2 for c=2, n=4: 1 - C(2,2)/C(4,2) = 1 - 1/6
    assert s["pass@k"]["2"] == pytest.approx((1 - 1 / 6) / 2)
    assert s["pass@k"]["4"] == pytest.approx(0.5)
    assert s["maj@k"]["1"] == pytest.approx(s["pass@1"]["mean"])  # four blocks of one: pass@1
    assert s["maj@k"]["2"] == pytest.approx(0.25)  # p0: blocks ("1","2"), ("1","2") both ties -> 0.5
    assert s["maj@k"]["4"] == pytest.approx(0.25)  # p0: 2-2 tie -> 0.5; p1: "3" wins, wrong
    assert s["curves"]["n"] == [1, 2, 4]
    assert s["curves"]["oracle"] == [s["pass@1"]["mean"], s["pass@k"]["2"], s["pass@k"]["4"]]


def test_an_answer_is_right_when_any_sample_giving_it_was_judged_right():
    # the second sample gives the right answer "1" but is judged wrong (it hedged); the vote still counts "1" right
    records = [problem(0, [sample(1.0, "1"), sample(0.0, "1"), sample(0.0, "2")])]
    assert summarise(records, settings(3, [3]))["strict"]["maj@k"]["3"] == 1.0


def test_unjudged_samples_count_wrong_and_unreadable_problems_are_left_out():
    records = [
        problem(0, [sample(1.0, "1"), sample(None, None)]),  # one sandbox failure
        problem(1, [sample(None, None), sample(None, None)]),  # gold unreadable: no verdict at all
    ]
    s = summarise(records, settings(2, [1, 2]))["strict"]
    assert s["problems"] == 1 and s["unjudged_samples"] == 1
    assert s["pass@1"]["mean"] == 0.5


def test_model_curve_is_best_of_n_over_the_scores_and_budget_curve_averages_cut_verdicts():
    samples = [sample(1.0, "1", score=0.2, budget=[0.0, 1.0]), sample(0.0, "2", score=0.9, budget=[0.0, 0.0]),
               sample(1.0, "1", score=0.5, budget=[1.0, 1.0])]
    s = summarise([problem(0, samples)], settings(3, [1, 3]))["strict"]["curves"]
    assert s["n"] == [1, 2, 3]
    assert s["model"] == [pytest.approx(best_of_n([0.2, 0.9, 0.5], [1, 0, 1], m)) for m in (1, 2, 3)]
    assert s["model"][-1] == 0.0  # the top-scored sample is the wrong one
    assert s["budget_pass@1"] == [pytest.approx(1 / 3), pytest.approx(2 / 3)]


def test_no_voting_and_no_scores_give_none_not_zero():
    records = [problem(0, [sample(1.0, None), sample(0.0, None)])]
    s = summarise(records, settings(2, [1, 2], voting=False))["strict"]
    assert s["maj@k"] is None and s["curves"]["majority"] is None and s["curves"]["model"] is None


def test_curve_points():
    assert curve_points(64) == [1, 2, 4, 8, 16, 32, 64]
    assert curve_points(5) == [1, 2, 4, 5]


def test_majority_averages_disjoint_blocks_and_leaves_a_remainder_out():
    # blocks of 2: ("1","1") right, ("2","2") wrong, ("1","2") tie; the 7th sample is left out
    answers = ["1", "1", "2", "2", "1", "2", "1"]
    records = [problem(0, [sample(1.0 if a == "1" else 0.0, a) for a in answers])]
    s = summarise(records, settings(7, [2, 7]))["strict"]
    assert s["maj@k"]["2"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert s["maj@k"]["7"] == 1.0  # four "1" against three "2"


def test_completions_report_format_share_and_reflection_rate():
    texts = [r"\boxed{1}", "wait, 2", r"\boxed{1} \boxed{2}", "3"]
    records = [problem(0, [SampleRecord(text=t, tokens=4, truncated=False, correct={"strict": 0.0, "lenient": 0.0},
                                        answer={"strict": None, "lenient": None},
                                        budget_correct={"strict": [0.0, 0.0], "lenient": [0.0, 0.0]})
                           for t in texts])]
    c = summarise(records, settings(4, [1]))["completions"]
    assert c["format_share"] == 0.25 and c["reflection_rate"] == 0.25
