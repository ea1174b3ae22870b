"""scripts/mutant_tests.py: a mutant runs only the tests that run the function it changes, and every test where
the change is outside every function body (what runs at import)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("mutant_tests", ROOT / "scripts" / "mutant_tests.py")
mutant_tests = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(mutant_tests)

SOURCE = '''\
LIMIT = 3


def outer(x, scale=LIMIT):
    """Doc."""
    def inner(y):
        return y + 1

    return inner(x) * scale


class Box:
    size = 2

    def grow(self):
        return self.size * 2
'''


def test_each_function_body_is_found_nested_ones_and_methods_too():
    assert sorted(mutant_tests.function_bodies(SOURCE)) == [(5, 9), (7, 7), (16, 16)]


def test_the_changed_lines_are_those_of_the_original():
    mutated = SOURCE.replace("return y + 1", "return y - 1")
    assert mutant_tests.changed_lines(SOURCE, mutated) == [7]
    assert mutant_tests.changed_lines(SOURCE, SOURCE) == []
    assert mutant_tests.changed_lines(SOURCE, SOURCE.replace("    size = 2\n", "")) == [13]


FUNCTIONS = [{"start": 5, "end": 9, "tests": ["t::outer", "t::both"]}, {"start": 7, "end": 7, "tests": ["t::inner"]},
             {"start": 16, "end": 16, "tests": []}]


def test_a_change_runs_the_tests_of_the_innermost_body_holding_it():
    assert mutant_tests.selected(FUNCTIONS, [7]) == ["t::inner"]
    assert mutant_tests.selected(FUNCTIONS, [9]) == ["t::both", "t::outer"]
    assert mutant_tests.selected(FUNCTIONS, [7, 9]) == ["t::both", "t::outer"]  # (only outer holds both)
    assert mutant_tests.selected(FUNCTIONS, [16]) == []  # a body no test runs: nothing can kill its mutant


def test_the_quickest_tests_run_first():
    seconds = {"t::outer": 0.5, "t::both": 30.0}
    assert mutant_tests.selected(FUNCTIONS, [9], seconds) == ["t::outer", "t::both"]
    assert mutant_tests.selected(FUNCTIONS, [9], {"t::outer": 0.5}) == ["t::both", "t::outer"]  # (unknown: 0 s)
    output = ("============ slowest durations ============\n"
              "12.50s call     tests/a.py::test_slow[x y]\n"
              "0.25s setup    tests/a.py::test_slow[x y]\n"
              "0.01s teardown tests/b.py::test_quick\n"
              "(2 durations < 0.005s hidden.)\n")
    assert mutant_tests.test_seconds(output) == {"tests/a.py::test_slow[x y]": 12.75, "tests/b.py::test_quick": 0.01}


def test_a_change_that_runs_at_import_runs_every_test():
    assert mutant_tests.selected(FUNCTIONS, [1]) is None  # module level
    assert mutant_tests.selected(FUNCTIONS, [4]) is None  # a default value: evaluated when the def runs
    assert mutant_tests.selected(FUNCTIONS, [13]) is None  # a class body
    assert mutant_tests.selected(FUNCTIONS, []) is None


def test_the_map_names_the_tests_that_run_each_function_and_a_mutant_runs_only_those(tmp_path):
    """Under coverage, each test is its own context; a mutant of `grow` runs its one test, which fails."""
    tree = tmp_path / "tree"
    (tree / "src" / "pkg").mkdir(parents=True)
    (tree / "tests").mkdir()
    (tree / "pyproject.toml").write_text("")
    module = tree / "src" / "pkg" / "mod.py"
    module.write_text(SOURCE)
    (tree / "tests" / "test_mod.py").write_text(
        "from pkg.mod import Box, outer\n\n"
        "def test_outer():\n    assert outer(1) == 6\n\n"
        "def test_grow():\n    assert Box().grow() == 4\n")
    pytest = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    env = {"PYTHONPATH": str(tree / "src"), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}  # (cosmic-ray's)
    out = tmp_path / "mod.map.json"
    mutant_tests.build_map(pytest, ["tests/test_mod.py"], module, tree, out, env)
    written = json.loads(out.read_text())
    assert sorted(written["seconds"]) == ["tests/test_mod.py::test_grow", "tests/test_mod.py::test_outer"]
    functions = {(f["start"], f["end"]): f["tests"] for f in written["functions"]}
    assert functions == {(5, 9): ["tests/test_mod.py::test_outer"], (7, 7): ["tests/test_mod.py::test_outer"],
                         (16, 16): ["tests/test_mod.py::test_grow"]}
    module.write_text(SOURCE.replace("self.size * 2", "self.size * 3"))
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutant_tests.py"), str(out)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "1 failed" in run.stdout and "passed" not in run.stdout
