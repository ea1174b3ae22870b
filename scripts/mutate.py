"""Mutation testing of the maths and the step's composition (`make mutate`), with cosmic-ray, and its report.

    .venv/bin/python scripts/mutate.py                      # every module below; writes docs/mutation.md
    .venv/bin/python scripts/mutate.py --modules kl         # some of them (the report keeps the others' rows)
    .venv/bin/python scripts/mutate.py --recheck            # only the last runs' unexplained survivors, at HEAD
    .venv/bin/python scripts/mutate.py --modules rl/update --shards 2   # one module's mutants split over two trees

Each module is mutated in a worktree of the last commit (never the working tree), two modules at a time (each in a
tree of its own), one thread each; with `--shards N` each module's mutants are split over N trees, so that one
module alone keeps both cores busy. The tests that cover a module (its doctests, its unit tests, the exact-
expectation proofs) run once under coverage first; each mutant then runs those of them that execute the function it
changes (scripts/mutant_tests.py; all of them for a change to what runs at import). A surviving mutant is a change
to the code that no test notices: it is killed by a new test, or explained in tests/mutation/equivalent.toml (why no
test can tell it from the original). Mutants of type annotations are skipped before they run: under `from __future__
import annotations` an annotation is a string that nothing evaluates, so such a mutant is the same program. Mutants
explained already (the same line mutated the same way) do not run either: they count as explained survivors. The
report lists every survivor with its explanation, and the script exits 1 while any is unexplained. It takes tens of
minutes on 2 cores, too long for CI: the report says at which commit and on which day each module last ran.
`--recheck` runs only the unexplained survivors of the last runs again, each against the tests as they are at HEAD
(after a test was written to kill it): a survivor killed there leaves the list, and the report's row says how many
were, at which commit.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shlex
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))  # (scripts/)
from mutant_tests import build_map

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "mutation.md"
EXPLAINED = ROOT / "tests" / "mutation" / "equivalent.toml"
RESULTS = ROOT / "tests" / "mutation" / "results.json"
PY = Path(sys.executable)
T = TypeVar("T")
K = TypeVar("K")
# module (its path under src/rlvr, without .py) -> the tests that cover it (besides its own doctests). The rows of
# docs/mutation.md say which have run, at which commit; a module listed here without a row has not run yet (at
# ~5-15 s a mutant on 2 cores, each is up to an hour or more: run them one or two at a time).
MODULES: dict[str, list[str]] = {
    "kl": ["tests/test_kl.py", "tests/objectives/test_exact_expectation.py"],
    "correction": ["tests/test_correction.py", "tests/objectives/test_token_weights.py"],
    "seeds": ["tests/test_seeds.py"],
    "advantages": ["tests/test_advantages.py"],
    # the step's composition: the losses, log-probs, the objective's table, the update, PPO's advantage path
    "losses": ["tests/test_losses.py", "tests/objectives/test_exact_expectation.py"],
    "logprobs": ["tests/test_logprobs.py", "tests/objectives/test_exact_expectation.py"],
    "rl/objective": ["tests/train/test_objectives.py", "tests/objectives/test_exact_expectation.py"],
    "rl/update": ["tests/objectives/test_exact_expectation.py", "tests/objectives/test_token_weights.py",
                  "tests/train/test_step.py", "tests/train/test_no_signal.py", "tests/train/test_rollout_correction.py",
                  "tests/train/test_objectives.py", "tests/harness/test_training.py", "tests/test_losses.py",
                  "tests/train/test_update_stats.py", "tests/distributed/test_ddp_update.py"],
    "ppo/gae": ["tests/ppo/test_gae.py", "tests/ppo/test_trainer.py"],
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modules", nargs="+", choices=list(MODULES), default=list(MODULES))
    p.add_argument("--recheck", action="store_true", help="run the last runs' unexplained survivors again, against "
                   "the tests at HEAD; those now killed leave the report")
    p.add_argument("--shards", type=int, default=1, help="split each module's mutants over this many trees (two run "
                   "at once)")
    p.add_argument("--report", action="store_true", help="only write the report again, from the last results and "
                   "the explanations as they are now (after explaining a survivor)")
    args = p.parse_args()
    if args.report:
        unexplained = write_report(json.loads(RESULTS.read_text()))
        print(f"report: {REPORT} ({unexplained} unexplained survivors)")
        return 1 if unexplained else 0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    def recorded() -> dict[str, dict]:  # (read again once the work is done: another run may have ended meanwhile)
        return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}

    if args.recheck:
        last = recorded()
        modules = [m for m in args.modules if m in last and unexplained_survivors(m, last[m])]
        rechecked = in_worktree(modules, lambda m, tree, tmp: recheck_module(m, last[m], tree, tmp))
        results = recorded()
        for m, (killed, gone) in rechecked.items():
            results[m]["survivors"] = [s for s in results[m]["survivors"] if s not in killed + gone]
            before = results[m].get("rechecked", {})
            results[m]["rechecked"] = {"commit": commit, "date": date.today().isoformat(),
                                       "killed": before.get("killed", 0) + len(killed),
                                       "rewritten": before.get("rewritten", 0) + len(gone)}
            print(f"{m}: of the survivors rechecked at {commit}, {len(killed)} are killed and {len(gone)} are on "
                  f"lines rewritten since")
    else:
        found = run_sharded(args.modules, args.shards)
        results = recorded()
        results.update({m: {**r, "commit": commit, "date": date.today().isoformat()} for m, r in found.items()})
    RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    unexplained = write_report(results)
    print(f"report: {REPORT} ({unexplained} unexplained survivors)")
    return 1 if unexplained else 0


def in_worktree(modules: list[K], work: Callable[[K, Path, Path], T]) -> dict[K, T]:
    """`work(module, tree, tmp)` for each module (or a module's shard), two at a time, each in a worktree of the
    last commit of its own (a mutant is written to disk while the tests run: in a shared tree, one module's mutant
    would be live while another's tests run, and kill its mutants for it)."""
    def alone(module: K) -> T:
        with tempfile.TemporaryDirectory(prefix="rlvr-mutate-") as tmp:
            tree = Path(tmp) / "tree"
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), "HEAD"], cwd=ROOT, check=True,
                           capture_output=True)
            try:
                return work(module, tree, Path(tmp))
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(modules, pool.map(alone, modules)))


def pytest_command(module: str, tree: Path) -> tuple[list[str], list[str]]:
    """The pytest command (one thread, stopping at the first failure) and the tests that cover `module` in `tree`."""
    path = tree / f"src/rlvr/{module}.py"  # (paths in the tree: the command runs from any folder)
    # (the suite's import mode: a test module may import another's helpers, as tests/ppo/test_trainer.py does)
    return ([str(PY), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--import-mode=importlib",
             "-W", "ignore", "--doctest-modules"], [str(path), *(str(tree / t) for t in MODULES[module])])


def environment(tree: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": "1"}


def test_command(module: str, tree: Path, select: Path | None = None) -> str:
    """The shell command that runs `module`'s tests in `tree` against a mutant on disk: all of them, or with the map
    `select` (scripts/mutant_tests.py), only those that run the function the mutant changes."""
    pytest, targets = pytest_command(module, tree)
    run = [*pytest, *targets] if select is None else [str(PY), str(ROOT / "scripts" / "mutant_tests.py"), str(select)]
    return shlex.join(["env", *(f"{k}={v}" for k, v in environment(tree).items()), *run])


def session_of(module: str, tree: Path, tmp: Path, select: Path | None = None,
               timeout: float = 600.0) -> tuple[Path, Path]:
    """A cosmic-ray session of every mutant of `module` (config, database), none run yet; a mutant whose tests
    run past `timeout` seconds counts as killed (a mutant that loops forever)."""
    name = module.replace("/", ".")  # (rl/update: one file in tmp)
    config, session = tmp / f"{name}.toml", tmp / f"{name}.sqlite"
    config.write_text(f'[cosmic-ray]\nmodule-path = "src/rlvr/{module}.py"\ntimeout = {timeout:.0f}.0\n'
                      f'excluded-modules = []\n'
                      f'test-command = {json.dumps(test_command(module, tree, select))}\n\n'
                      f'[cosmic-ray.distributor]\nname = "local"\n')
    subprocess.run([str(PY.with_name("cosmic-ray")), "init", str(config), str(session)], cwd=tree, check=True)
    return config, session


def recheck_module(module: str, result: dict, tree: Path, tmp: Path) -> tuple[list[dict], list[dict]]:
    """The unexplained survivors of `module`'s last run that the tests in `tree` now kill, and those whose line is
    no longer in the code (rewritten since: a whole run mutates the new line). Each is found again among the
    module's mutants by its operator and its line as written and as mutated (lines may have moved)."""
    import attrs
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome

    path = tree / f"src/rlvr/{module}.py"
    lines = path.read_text().splitlines()
    select, _ = mapped(module, tree, tmp)
    _, session = session_of(module, tree, tmp, select)
    with use_db(str(session), WorkDB.Mode.open) as db:
        specs = [item.mutations[0] for item in db.work_items]
    killed, gone, command = [], [], test_command(module, tree, select)
    for s in unexplained_survivors(module, result):
        again = [m for m in specs
                 if m.operator_name == s["operator"] and lines[m.start_pos[0] - 1].strip() == s["before"]]
        if not again:
            print(f"{module}:{s['line']} `{s['before']}` is no longer in the code: rewritten since the run")
            gone.append(s)
        for spec in again:
            outcome = mutate_and_test([attrs.evolve(spec, module_path=path)], command, 600.0)
            if mutated_line(outcome.diff) != s["after"]:
                continue  # (another mutant of the same operator on that line)
            print(f"{module}:{spec.start_pos[0]} {s['after']}: {outcome.test_outcome}")
            if outcome.test_outcome == TestOutcome.KILLED:
                killed.append(s)
            break
    return killed, gone


def unexplained_survivors(module: str, result: dict) -> list[dict]:
    explained = explanations()
    return [s for s in result["survivors"] if reason(module, s, explained) is None]


def mapped(module: str, tree: Path, tmp: Path) -> tuple[Path, float]:
    """Which tests run each function of `module` in `tree` (one run of them under coverage: scripts/mutant_tests.py),
    for a mutant to run only those of the function it changes: (the map, the seconds that run took)."""
    select = tmp / f"{module.replace('/', '.')}.map.json"
    seconds = build_map(*pytest_command(module, tree), tree / f"src/rlvr/{module}.py", tree, select,
                        {**os.environ, **environment(tree)})
    return select, seconds


def run_sharded(modules: list[str], shards: int) -> dict[str, dict]:
    """run_module for each module, its mutants split into `shards` shares, each run in a tree of its own; the
    shares' results added up."""
    parts = in_worktree([(m, i) for m in modules for i in range(shards)],
                        lambda part, tree, tmp: run_module(part[0], tree, tmp, (part[1], shards)))
    found: dict[str, dict] = {}
    for (module, _), result in parts.items():
        into = found.setdefault(module, {"mutants": 0, "killed": 0, "skipped": 0, "survivors": []})
        for key in ("mutants", "killed", "skipped"):
            into[key] += result[key]
        into["survivors"] = sorted(into["survivors"] + result["survivors"], key=lambda s: s["line"])
    return found


def keep_shard(session: Path, index: int, count: int) -> None:
    """Leave in the cosmic-ray `session` only shard `index` of `count`: every count-th mutant in the order of
    their place in the file, operator and occurrence (the same order in every tree, whatever the job ids)."""
    import sqlite3

    with sqlite3.connect(session) as db:
        specs = db.execute("SELECT job_id, start_pos_row, start_pos_col, operator_name, occurrence "
                           "FROM mutation_specs").fetchall()
        others = [(s[0],) for k, s in enumerate(sorted(specs, key=lambda s: s[1:])) if k % count != index]
        db.executemany("DELETE FROM mutation_specs WHERE job_id = ?", others)
        db.executemany("DELETE FROM work_items WHERE job_id = ?", others)


def run_module(module: str, tree: Path, tmp: Path, shard: tuple[int, int] = (0, 1)) -> dict[str, object]:
    """cosmic-ray on src/rlvr/{module}.py in `tree` (shard i of n of its mutants): {"mutants", "killed",
    "skipped", "survivors": [...]}."""
    path = f"src/rlvr/{module}.py"
    select, seconds = mapped(module, tree, tmp)
    # (a mutant of what runs at import runs all the tests: never slower than that traced run, on the same machine)
    config, session = session_of(module, tree, tmp, select, timeout=max(120.0, 2 * seconds))
    cosmic = PY.with_name("cosmic-ray")
    keep_shard(session, *shard)
    skipped = skip_annotations(session, tree / path)
    print(f"{module}: {known_equivalents(session, tree / path, module)} mutants already explained, not run")
    subprocess.run([str(cosmic), "baseline", str(config)], cwd=tree, check=True)
    subprocess.run([str(cosmic), "exec", str(config), str(session)], cwd=tree, check=True)
    dump = subprocess.run([str(cosmic), "dump", str(session)], cwd=tree, capture_output=True, text=True,
                          check=True).stdout
    jobs = [json.loads(line) for line in dump.splitlines() if line.strip()]
    survivors = [survivor(item, result, tree / path) for item, result in jobs
                 if result and result.get("test_outcome") == "survived"]
    killed = sum(1 for _, r in jobs if r and r.get("test_outcome") == "killed")
    return {"mutants": len(jobs), "killed": killed, "skipped": skipped, "survivors": survivors}


def annotation_spans(source: str) -> list[tuple[int, int, int, int]]:
    """(line, col, end line, end col) of every type annotation in `source`."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        notes = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg]
            notes = [a.annotation for a in args if a is not None and a.annotation is not None] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            notes = [node.annotation]
        spans += [(n.lineno, n.col_offset, n.end_lineno or n.lineno, n.end_col_offset or 0) for n in notes if n]
    return spans


def skip_annotations(session: Path, source: Path) -> int:
    """Mark the mutants inside type annotations as skipped (see the module docstring); how many."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    text = source.read_text()
    if "from __future__ import annotations" not in text:
        return 0
    spans = annotation_spans(text)
    count = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.work_items:
            (line, col), _ = item.mutations[0].start_pos, item.mutations[0].end_pos
            if any((a, b) <= (line, col) <= (c, d) for a, b, c, d in spans):
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                      output="inside a type annotation (a string: never evaluated)"))
                count += 1
    return count


def known_equivalents(session: Path, source: Path, module: str) -> int:
    """Record the mutants explained already (tests/mutation/equivalent.toml: this line of the module, mutated this
    way; a line the module holds once) as survivors without running them, since the explanation says why no test
    can tell them from the original; how many. A survivor costs a run of every test of its function, the dearest
    of all mutants."""
    import difflib

    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    explained = explanations()
    explained_lines = {e["before"] for e in explained if e["module"] == module}
    code = source.read_text()
    lines, count = [line.strip() for line in code.splitlines()], 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            spec = item.mutations[0]
            before = lines[spec.start_pos[0] - 1]
            if lines.count(before) > 1 or before not in explained_lines:
                continue  # (a line written twice: the explanation may hold for one of them only)
            operator = cosmic_ray.plugins.get_operator(spec.operator_name)(**(spec.operator_args or {}))
            mutated = mutate_code(code, operator, spec.occurrence)
            if mutated is None:
                continue
            diff = "\n".join(["--- mutation diff ---", *difflib.unified_diff(
                code.split("\n"), mutated.split("\n"), f"a/{source.name}", f"b/{source.name}", lineterm="")])
            if reason(module, {"before": before, "after": mutated_line(diff), "function": spec.definition_name},
                      explained) is not None:
                db.set_result(item.job_id, WorkResult(
                    worker_outcome=WorkerOutcome.NORMAL, test_outcome=TestOutcome.SURVIVED, diff=diff,
                    output="explained in tests/mutation/equivalent.toml: not run"))
                count += 1
    return count


def survivor(item: dict, result: dict, source: Path) -> dict[str, object]:
    """A surviving mutant as the report shows it: where, the operator, the line before and after."""
    mutation = item["mutations"][0]
    line = mutation["start_pos"][0]
    return {"line": line, "function": mutation.get("definition_name"), "operator": mutation["operator_name"],
            "before": source.read_text().splitlines()[line - 1].strip(), "after": mutated_line(result.get("diff"))}


def mutated_line(diff: str | None) -> str:
    """The line a mutant's diff adds, as the report shows it."""
    added = (d for d in (diff or "").splitlines() if d.startswith("+") and d[1:2] not in "-+")
    return next((d[1:].strip() for d in added), "")


def write_report(results: dict[str, dict]) -> int:
    """docs/mutation.md from the results; the number of survivors without an explanation."""
    explained = explanations()
    lines = ["# Mutation testing", "",
             "`make mutate` (scripts/mutate.py) mutates the maths and the step's composition with cosmic-ray and runs "
             "the tests that cover each module against every mutant. A survivor is a change no test notices: each one "
             "below is explained as equivalent (tests/mutation/equivalent.toml), or the run fails. Mutants of type "
             "annotations are skipped (strings under `from __future__ import annotations`), and a mutant explained "
             "already (the same line mutated the same way) is counted as an explained survivor without running again. "
             "A row's \"+ N since\" "
             "counts the survivors of that run that a test written after it kills (`scripts/mutate.py --recheck`, at "
             "the commit named), and those whose line a fix has rewritten since (the next whole run mutates the new "
             "line).", "",
             "| module | last run | mutants | killed | skipped (annotations) | survived, explained | unexplained |",
             "|---|---|---|---|---|---|---|"]
    unexplained_total, detail = 0, []
    for module, r in sorted(results.items()):
        why = [(s, reason(module, s, explained)) for s in r["survivors"]]
        unexplained = sum(1 for _, w in why if w is None)
        unexplained_total += unexplained
        again = r.get("rechecked")
        n = again.get("rewritten", 0) if again else 0
        rewritten = (f", {n} survivors' lines rewritten" if n > 1 else ", 1 survivor's line rewritten") if n else ""
        killed = (f"{r['killed']} + {again['killed']} since{rewritten} ({again['date']}, {again['commit']})" if again
                  else r["killed"])
        lines.append(f"| `rlvr/{module}.py` | {r['date']}, {r['commit']} | {r['mutants']} | {killed} | "
                     f"{r['skipped']} | {len(why) - unexplained} | {unexplained} |")
        for s, w in why:
            detail.append(f"- `rlvr/{module}.py:{s['line']}` ({s['function']}, {s['operator']}): `{s['before']}` → "
                          f"`{s['after']}`: {w or '**unexplained**'}")
    lines += ["", "## Survivors", "", *(detail or ["None."]), ""]
    REPORT.write_text("\n".join(lines))
    return unexplained_total


def explanations() -> list[dict]:
    """The explained survivors (tests/mutation/equivalent.toml), as its entries."""
    return tomllib.loads(EXPLAINED.read_text()).get("equivalent", []) if EXPLAINED.exists() else []


def reason(module: str, s: dict, explained: list[dict]) -> str | None:
    """Why survivor `s` is equivalent, or None: an explanation of its module, line and mutated line (and its function,
    where the explanation names one: a line a module holds twice)."""
    for e in explained:
        if (e["module"] == module and e["before"] == s["before"] and e["after"] == s["after"]
                and e.get("function", s["function"]) == s["function"]):
            return str(e["why"])
    return None


if __name__ == "__main__":
    sys.exit(main())
