"""load_reward_function: built-in names, module:function, file.py:function, and every error."""

import textwrap

import pytest

from rlvr.errors import UserError
from rlvr.rewards.loading import BUILTIN_REWARDS, load_reward_function
from rlvr.rewards.math import math_accuracy

MODULE_SOURCE = textwrap.dedent(
    """
    NOT_A_FUNCTION = 3

    def exact_match(completions, answer, **kwargs):
        return [float(c == a) for c, a in zip(completions, answer)]
    """
)


@pytest.fixture
def reward_module(tmp_path, monkeypatch):
    """A package `my_rewards_pkg.scoring` importable from a temporary folder."""
    package = tmp_path / "my_rewards_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "scoring.py").write_text(MODULE_SOURCE)
    (package / "broken.py").write_text("import a_module_that_does_not_exist_xyz\n")
    (package / "crashing.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return package


def test_builtin_by_name():
    assert load_reward_function("math_accuracy") is math_accuracy
    assert load_reward_function("  countdown ") is BUILTIN_REWARDS["countdown"]


def test_every_builtin_loads_and_is_callable():
    for name, fn in BUILTIN_REWARDS.items():
        assert load_reward_function(name) is fn
        assert callable(fn)


def test_unknown_builtin_lists_builtins_and_nearest():
    with pytest.raises(UserError) as error:
        load_reward_function("math_acuracy")
    message = str(error.value)
    assert "did you mean 'math_accuracy'" in message
    assert all(name in message for name in BUILTIN_REWARDS)
    assert "\n" not in message


def test_module_function(reward_module):
    fn = load_reward_function("my_rewards_pkg.scoring:exact_match")
    assert fn(completions=["4", "5"], answer=["4", "4"]) == [1.0, 0.0]


def test_file_function(tmp_path):
    path = tmp_path / "file_rewards.py"
    path.write_text(MODULE_SOURCE)
    fn = load_reward_function(f"{path}:exact_match")
    assert fn(completions=["4"], answer=["4"]) == [1.0]
    assert load_reward_function(f"{path}:exact_match") is fn  # loaded once


def test_two_files_with_the_same_name_do_not_collide(tmp_path):
    for folder, value in (("a", 1.0), ("b", 2.0)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "rewards.py").write_text(f"def r(completions, **kw):\n    return [{value}]\n")
    a = load_reward_function(f"{tmp_path / 'a' / 'rewards.py'}:r")
    b = load_reward_function(f"{tmp_path / 'b' / 'rewards.py'}:r")
    assert (a(completions=["x"]), b(completions=["x"])) == ([1.0], [2.0])


def test_module_not_importable():
    with pytest.raises(UserError, match="cannot import module 'no_such_module_xyz'"):
        load_reward_function("no_such_module_xyz:fn")


def test_module_whose_import_fails(reward_module):
    with pytest.raises(UserError, match="a_module_that_does_not_exist_xyz"):
        load_reward_function("my_rewards_pkg.broken:fn")


def test_module_that_raises_at_import(reward_module):
    with pytest.raises(UserError, match="RuntimeError: boom at import"):
        load_reward_function("my_rewards_pkg.crashing:fn")


def test_missing_attribute_suggests_the_nearest(reward_module):
    with pytest.raises(UserError, match="no attribute 'exact_mach'.*did you mean 'exact_match'"):
        load_reward_function("my_rewards_pkg.scoring:exact_mach")


def test_not_callable(reward_module):
    with pytest.raises(UserError, match="is an int, not a function"):
        load_reward_function("my_rewards_pkg.scoring:NOT_A_FUNCTION")


def test_file_not_found(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_reward_function(f"{tmp_path / 'missing.py'}:fn")


def test_file_with_syntax_error(tmp_path):
    path = tmp_path / "bad_syntax.py"
    path.write_text("def f(:\n")
    with pytest.raises(UserError, match="SyntaxError"):
        load_reward_function(f"{path}:f")


def test_file_missing_attribute(tmp_path):
    path = tmp_path / "some_rewards.py"
    path.write_text(MODULE_SOURCE)
    with pytest.raises(UserError, match="no attribute 'nope'"):
        load_reward_function(f"{path}:nope")


@pytest.mark.parametrize("spec", ["module:", ":function", ":"])
def test_malformed_spec(spec):
    with pytest.raises(UserError, match="module:function"):
        load_reward_function(spec)


# --- parameters from the config ---------------------------------------------------------------


def test_parameters_are_bound_and_the_name_kept():
    fn = load_reward_function("overlong_penalty", max_tokens=10, cache_tokens=5)
    assert fn.__name__ == "overlong_penalty"
    assert fn(completions=["a", "b"], completion_ids=[[0] * 5, [0] * 8]) == [0.0, pytest.approx(-0.6)]


def test_parameters_reach_user_functions_too(tmp_path):
    path = tmp_path / "scaled.py"
    path.write_text("def scaled(completions, scale=1.0, **kwargs):\n    return [scale] * len(completions)\n")
    assert load_reward_function(f"{path}:scaled", scale=0.5)(completions=["x"]) == [0.5]


def test_unknown_parameter_names_the_nearest_and_the_known_ones():
    message = "no parameter 'timeout'; did you mean 'timeout_s'\\?.*mode, timeout_s, rel_tol"
    with pytest.raises(UserError, match=message):
        load_reward_function("math_accuracy", timeout=5)


def test_kwargs_catch_all_does_not_make_any_name_a_parameter():
    # **kwargs receives the dataset columns: a typo must not vanish into it.
    with pytest.raises(UserError, match="no parameter 'max_token'"):
        load_reward_function("overlong_penalty", max_token=10)


def test_trl_arguments_cannot_be_bound():
    with pytest.raises(UserError, match="no parameter 'completions'"):
        load_reward_function("boxed_format", completions=["x"])


def test_new_rewards_are_builtins():
    assert {"sudoku", "language_consistency", "overlong_penalty"} <= set(BUILTIN_REWARDS)


def test_grader_specs_load_through_the_same_registry(tmp_path):
    """A config can name a grader type with its fields as params, or a grader spec file; the built-in
    of the same name (countdown) is still the built-in."""
    from rlvr.rewards import RewardSpec, compute_rewards

    spec = tmp_path / "exact.yaml"
    spec.write_text("type: string_check\nname: exact\nreference: '{{ item.answer }}'\noperation: eq\n")
    by_file = load_reward_function(str(spec))
    by_type = load_reward_function("string_check", reference="{{ item.answer }}", operation="eq")
    result = compute_rewards([RewardSpec("file", by_file), RewardSpec("type", by_type, 0.5)], prompts=["q", "q"],
                             completions=["4", "5"], completion_ids=[[], []], columns={"answer": ["4", "4"]})
    assert result.components == {"file": [1.0, 0.0], "type": [1.0, 0.0]} and result.total == [1.5, 0.0]
    assert result.reasons["file"] == ["input equals '4'", "input does not equal '4'"]
    assert load_reward_function("countdown") is BUILTIN_REWARDS["countdown"]
    with pytest.raises(UserError, match="grader spec file: give its settings in the file"):
        load_reward_function(str(spec), operation="ne")
