"""How the kinds of rows are scored, defined once: maths rows (an `answer` column) and code rows
(`tests`, or `test` + `entry_point`). Built-in tasks carry their own (rlvr.data.tasks)."""

from __future__ import annotations

from collections.abc import Collection

from rlvr.errors import UserError
from rlvr.records import Scoring

MATH = Scoring(
    rewards=(("math_accuracy", 1.0), ("boxed_format", 0.1)),
    strict="math_accuracy",
    lenient="math_accuracy_lenient",
    extraction=("the last \\boxed{} (else the last <answer>); several different boxed answers score 0",
                "strict, else GSM8K's '#### N', else 'the answer is X', else the last number"),
)
CODE = Scoring(
    rewards=(("code_tests", 1.0),),
    strict="code_tests_all",
    lenient="code_continuation_all",
    extraction=("the last ```python block, run after the prompt's code; every test must pass",
                "the last ```python block, else the whole completion as the function's continuation"),
)


def verifier_for_columns(columns: Collection[str]) -> Scoring | None:
    """Code when the rows have tests, maths when they have an answer; None when they have neither (the
    run's own correctness reward judges them).

    >>> verifier_for_columns({"answer"}).strict, verifier_for_columns({"test"}).strict, verifier_for_columns({"x"})
    ('math_accuracy', 'code_tests_all', None)
    """
    if "tests" in columns or "test" in columns:
        return CODE
    if "answer" in columns:
        return MATH
    return None


def scoring_for_columns(columns: Collection[str], source: str, default: Scoring | None = None) -> Scoring:
    """The rows' verifier (`verifier_for_columns`); otherwise `default`, or a UserError naming `source`
    when there is none.

    >>> (scoring_for_columns({"prompt", "answer"}, "x.jsonl").strict,
    ...  scoring_for_columns({"test", "entry_point"}, "y.jsonl").strict)
    ('math_accuracy', 'code_tests_all')
    """
    found = verifier_for_columns(columns) or default
    if found is not None:
        return found
    raise UserError(f"{source}: rows need an `answer` column (maths) or `tests` / `test` + `entry_point` (code) to be "
                    "scored; or name the rewards in the config")
