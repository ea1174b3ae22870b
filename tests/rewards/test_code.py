"""Code rewards: extraction, stdin/stdout and HumanEval-style tests, modes, and None for infra.

These run real programs: under bubblewrap where it works, else with rlimits only (the sandbox
warns about that; the warning is silenced here, test_runner.py checks it).
"""

import pytest

from rlvr.errors import UserError
from rlvr.rewards.code import code_tests, code_tests_all, extract_code, normalize_output
from rlvr.sandbox import Limits, command

pytestmark = pytest.mark.filterwarnings("ignore:rlvr.sandbox")

LIMITS = Limits(cpu_seconds=2, wall_seconds=5)
ADD_CASES = [{"input": "1 2\n", "output": "3\n"}, {"input": "10 -4\n", "output": "6\n"}]


def fenced(source: str, tag: str = "python") -> str:
    return f"Let me think.\n```{tag}\n{source}\n```\nDone."


def stdio(source: str, cases=ADD_CASES, mode: str = "fraction") -> float | None:
    return code_tests([fenced(source)], tests=[cases], mode=mode, limits=LIMITS)[0]


# -- extraction -------------------------------------------------------------------------------


def test_extract_last_python_block():
    text = "```python\nprint(1)\n```\ntext\n```python\nprint(2)\n```"
    assert extract_code(text) == "print(2)\n"


def test_extract_bare_block():
    assert extract_code("```\nx = 1\n```") == "x = 1\n"


def test_extract_skips_other_languages():
    assert extract_code("```python\nprint(1)\n```\n```bash\nls\n```") == "print(1)\n"


def test_extract_does_not_pair_a_closing_fence_with_the_next_block():
    text = "```bash\nls\n```\nprose\n```python\nprint(3)\n```"
    assert extract_code(text) == "print(3)\n"


def test_extract_nothing():
    assert extract_code("print(1)") is None
    assert extract_code("```python\nprint(1)") is None  # cut off before the closing fence


def test_normalize_output():
    assert normalize_output("a  \nb\t\n\n\n") == "a\nb"
    assert normalize_output("a\r\nb") == "a\nb"
    assert normalize_output("  a") == "  a"  # leading spaces are kept


# -- stdin/stdout -----------------------------------------------------------------------------


def test_stdio_correct():
    assert stdio("a, b = map(int, input().split())\nprint(a + b)") == 1.0


def test_stdio_whitespace_normalised():
    assert stdio("a, b = map(int, input().split())\nprint(a + b, '  ')\nprint()\nprint()") == 1.0


def test_stdio_wrong():
    assert stdio("print(3)") == 0.5  # right for the first case only


def test_stdio_prefix_is_not_a_pass():
    assert stdio("print(3)\nprint(4)", cases=[{"input": "", "output": "3\n"}]) == 0.0


def test_stdio_extra_output_is_not_a_pass():
    assert stdio("print(3)", cases=[{"input": "", "output": "3\n4\n"}]) == 0.0


def test_stdio_crash_after_right_output_fails():
    assert stdio("print(3)\nraise SystemExit(1)", cases=[{"input": "", "output": "3\n"}]) == 0.0


def test_fraction_vs_all():
    assert stdio("print(3)", mode="fraction") == 0.5
    assert stdio("print(3)", mode="all") == 0.0
    completion = fenced("a, b = map(int, input().split())\nprint(a + b)")
    assert code_tests_all([completion], tests=[ADD_CASES], limits=LIMITS) == [1.0]


def test_tests_as_json_string():
    cases = '[{"input": "", "output": "7"}]'
    assert code_tests([fenced("print(7)")], tests=[cases], limits=LIMITS) == [1.0]


def test_no_code_block_scores_zero():
    assert code_tests(["print(3)"], tests=[ADD_CASES], limits=LIMITS) == [0.0]


def test_chat_completion():
    completion = [{"role": "assistant", "content": fenced("print(3)")}]
    assert code_tests([completion], tests=[[{"input": "", "output": "3"}]], limits=LIMITS) == [1.0]


def test_row_without_tests_is_not_scored():
    assert code_tests([fenced("print(3)")], tests=[None], limits=LIMITS) == [None]


def test_sandbox_failure_is_none(monkeypatch):
    monkeypatch.setattr(command, "sandbox_command", lambda *args: (["/nonexistent/bwrap"], True))
    assert code_tests([fenced("print(3)")], tests=[ADD_CASES], limits=LIMITS) == [None]


def test_missing_columns():
    with pytest.raises(UserError, match="tests"):
        code_tests([fenced("print(3)")])


def test_malformed_cases():
    with pytest.raises(UserError, match="input"):
        code_tests([fenced("print(3)")], tests=[[{"in": "", "out": "3"}]])


def test_unknown_mode():
    with pytest.raises(UserError, match="mode"):
        code_tests([fenced("print(3)")], tests=[ADD_CASES], mode="most")


def test_batch_in_parallel_keeps_order():
    sources = [f"print({i})" for i in range(6)]
    rewards = code_tests([fenced(s) for s in sources], tests=[[{"input": "", "output": "3"}]] * 6,
                         limits=LIMITS)
    assert rewards == [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]


# -- HumanEval-style function tests -----------------------------------------------------------

# HumanEval/0, has_close_elements: its prompt, canonical solution and test, as in the dataset.
HAS_CLOSE_TEST = '''

METADATA = {
    'author': 'jt',
    'dataset': 'test'
}


def check(candidate):
    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True
    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False
    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.95) == True
    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.8) == False
    assert candidate([1.0, 2.0, 3.0, 4.0, 5.0, 2.0], 0.1) == True
    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 1.0) == True
    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) == False

'''
HAS_CLOSE_SOLUTION = '''from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """ Check if in given list of numbers, are any two numbers closer to each other than
    given threshold.
    """
    for idx, elem in enumerate(numbers):
        for idx2, elem2 in enumerate(numbers):
            if idx != idx2:
                distance = abs(elem - elem2)
                if distance < threshold:
                    return True

    return False
'''


def humaneval(source: str, test: str = HAS_CLOSE_TEST, entry_point: str = "has_close_elements",
              mode: str = "fraction") -> float | None:
    return code_tests([fenced(source)], test=[test], entry_point=[entry_point], mode=mode,
                      limits=LIMITS)[0]


def test_humaneval_canonical_solution():
    assert humaneval(HAS_CLOSE_SOLUTION) == 1.0


def test_humaneval_wrong_solution():
    # Always True: right for the 4 cases expecting True, wrong for the 3 expecting False.
    assert humaneval("def has_close_elements(numbers, threshold):\n    return True\n") == 4 / 7
    assert humaneval("def has_close_elements(numbers, threshold):\n    return True\n", mode="all") == 0.0


def test_humaneval_missing_function():
    assert humaneval("def something_else():\n    return True\n") == 0.0


def test_humaneval_tuples_and_dicts_round_trip():
    test = ("def check(candidate):\n    assert candidate('a b a') == {'a': 2, 'b': 1}\n"
            "    assert candidate('') == {}\n    assert type(candidate('x')) is dict\n")
    source = ("def histogram(s):\n    out = {}\n    for w in s.split():\n"
              "        out[w] = out.get(w, 0) + 1\n    return out\n")
    assert humaneval(source, test, "histogram") == 1.0
    tuple_test = "def check(candidate):\n    assert candidate([3, 1, 2]) == (1, 3)\n"
    assert humaneval("def span(xs):\n    return (min(xs), max(xs))\n", tuple_test, "span") == 1.0
    assert humaneval("def span(xs):\n    return [min(xs), max(xs)]\n", tuple_test, "span") == 0.0


def test_humaneval_test_that_aborts_counts_the_rest_as_failed():
    test = ("def check(candidate):\n    assert candidate(1) == 1\n    x = candidate(0)\n"
            "    assert x == 0\n")
    assert humaneval("def inv(x):\n    return 1 / x\n", test, "inv") == 0.5  # 1 of 2 asserts


def test_humaneval_broken_test_is_none():
    test = "def check(candidate):\n    assert candidate(1) == helper(1)\n"  # helper is undefined
    assert humaneval("def f(x):\n    return x\n", test, "f") is None


def test_humaneval_test_without_check():
    with pytest.raises(UserError, match="check"):
        humaneval("def f(x):\n    return x\n", "assert f(1) == 1\n", "f")


def test_humaneval_bad_entry_point():
    with pytest.raises(UserError, match="entry_point"):
        humaneval("def f(x):\n    return x\n", HAS_CLOSE_TEST, "not a name")


def test_humaneval_constant_asserts_do_not_count():
    # HumanEval tests carry `assert True, "..."` debugging lines: they pass for everyone.
    test = ("def check(candidate):\n    assert True, 'This prints if this assert fails 1'\n"
            "    assert candidate(2) == 4\n    assert True\n")
    assert humaneval("def double(x):\n    return 0\n", test, "double") == 0.0


def test_humaneval_slow_call_fails_only_itself():
    # The call that never returns is stopped by the CPU limit; the two before it still count.
    test = ("def check(candidate):\n    assert candidate(1) == 1\n    assert candidate(2) == 2\n"
            "    assert candidate(-1) == -1\n")
    source = "def ident(x):\n    while x < 0:\n        pass\n    return x\n"
    limits = Limits(cpu_seconds=1, wall_seconds=5)
    assert code_tests([fenced(source)], test=[test], entry_point=["ident"], limits=limits) == [2 / 3]
