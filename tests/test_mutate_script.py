"""scripts/mutate.py's bookkeeping (the mutation runs themselves take hours: not here): each module in a tree of
its own, the tests it runs found in that tree, and the report's rows and survivors."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script():
    spec = importlib.util.spec_from_file_location("mutate_script", ROOT / "scripts" / "mutate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutate_script"] = module  # (dataclasses and the like look their module up)
    spec.loader.exec_module(module)
    return module


def test_each_module_is_mutated_in_a_tree_of_its_own_removed_after():
    """A mutant is on disk while its tests run: a tree shared by two modules would run one's tests over the
    other's mutant."""
    mutate = load_script()
    trees = mutate.in_worktree(["kl", "correction"], lambda module, tree, tmp: (tree, (tree / "src").is_dir()))
    (kl, kl_there), (correction, correction_there) = trees["kl"], trees["correction"]
    assert kl != correction and kl_there and correction_there
    assert not kl.exists() and not correction.exists()


def test_a_modules_tests_are_the_ones_in_its_tree(tmp_path):
    mutate = load_script()
    command = mutate.test_command("ppo/gae", tmp_path)
    assert f"--doctest-modules {tmp_path}/src/rlvr/ppo/gae.py" in command
    assert f"{tmp_path}/tests/ppo/test_gae.py" in command and f"PYTHONPATH={tmp_path}/src" in command
    assert " tests/" not in command  # (nothing relative to the folder it happens to run from)
    selecting = mutate.test_command("ppo/gae", tmp_path, tmp_path / "gae.map.json")  # (scripts/mutant_tests.py)
    assert selecting.endswith(f"scripts/mutant_tests.py {tmp_path}/gae.map.json")
    assert f"PYTHONPATH={tmp_path}/src" in selecting


def test_the_report_counts_survivors_killed_since_and_marks_the_unexplained(tmp_path, monkeypatch):
    mutate = load_script()
    explained = tmp_path / "equivalent.toml"
    explained.write_text("[[equivalent]]\nmodule = 'kl'\nbefore = 'a = -1'\nafter = 'a = +1'\nwhy = 'the same'\n")
    monkeypatch.setattr(mutate, "EXPLAINED", explained)
    monkeypatch.setattr(mutate, "REPORT", tmp_path / "mutation.md")
    same = {"line": 3, "function": "f", "operator": "op", "before": "a = -1", "after": "a = +1"}
    other = {**same, "line": 4, "before": "b = 1", "after": "b = 2"}
    results = {"kl": {"date": "2026-11-30", "commit": "abc1234", "mutants": 20, "killed": 15, "skipped": 2,
                      "survivors": [same, other], "rechecked": {"date": "2026-12-01", "commit": "def5678",
                                                                "killed": 1, "rewritten": 2}}}
    assert mutate.write_report(results) == 1
    report = (tmp_path / "mutation.md").read_text()
    assert ("| `rlvr/kl.py` | 2026-11-30, abc1234 | 20 | 15 + 1 since, 2 survivors' lines rewritten (2026-12-01, "
            "def5678) | 2 | 1 | 1 |") in report
    assert "`a = -1` → `a = +1`: the same" in report and "`b = 1` → `b = 2`: **unexplained**" in report
    assert mutate.unexplained_survivors("kl", results["kl"]) == [other]


def test_a_modules_shards_split_its_mutants_between_them_each_once(tmp_path):
    """Each shard inits its own session (job ids differ between inits); their shares are disjoint and cover all."""
    import sqlite3

    mutate = load_script()
    shares = []
    for index in range(2):
        (tmp_path / str(index)).mkdir()
        _, session = mutate.session_of("seeds", ROOT, tmp_path / str(index))
        with sqlite3.connect(session) as db:
            everything = db.execute("SELECT start_pos_row, start_pos_col, operator_name, occurrence "
                                    "FROM mutation_specs").fetchall()
        mutate.keep_shard(session, index, 2)
        with sqlite3.connect(session) as db:
            share = db.execute("SELECT start_pos_row, start_pos_col, operator_name, occurrence "
                               "FROM mutation_specs").fetchall()
            assert db.execute("SELECT count(*) FROM work_items").fetchone()[0] == len(share)
        shares.append(set(share))
    assert not shares[0] & shares[1] and shares[0] | shares[1] == set(everything)
    assert abs(len(shares[0]) - len(shares[1])) <= 1 and len(everything) > 100


def test_the_shards_results_add_up_to_the_modules(monkeypatch):
    mutate = load_script()

    def run_module(module, tree, tmp, shard):
        index, _ = shard
        return {"mutants": 10 + index, "killed": 7, "skipped": index, "survivors": [{"line": 20 - 10 * index}]}

    monkeypatch.setattr(mutate, "run_module", run_module)
    assert mutate.run_sharded(["kl"], 2) == {
        "kl": {"mutants": 21, "killed": 14, "skipped": 1, "survivors": [{"line": 10}, {"line": 20}]}}


def test_mutants_explained_already_are_survivors_without_running(tmp_path):
    """What tests/mutation/equivalent.toml explains for rlvr.seeds is recorded as survived before any test runs,
    with the diff the report reads its mutated line from; nothing else is."""
    import tomllib

    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome

    mutate = load_script()
    _, session = mutate.session_of("seeds", ROOT, tmp_path)
    explained = [e for e in tomllib.loads(mutate.EXPLAINED.read_text())["equivalent"] if e["module"] == "seeds"]
    assert mutate.known_equivalents(session, ROOT / "src" / "rlvr" / "seeds.py", "seeds") == len(explained) > 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        results = [result for _, result in db.results]
    assert all(r.test_outcome == TestOutcome.SURVIVED for r in results)
    assert sorted(mutate.mutated_line(r.diff) for r in results) == sorted(e["after"] for e in explained)
