"""Mutation testing of the maths and the step's composition (`make mutate`), with cosmic-ray, and its report.

    .venv/bin/python scripts/mutate.py                      # every module below; writes docs/mutation.md
    .venv/bin/python scripts/mutate.py --modules kl         # some of them (the report keeps the others' rows)

Each module is mutated in a worktree of the last commit (never the working tree), and each mutant runs the
tests that cover the module (its doctests, its unit tests, the exact-expectation proofs), two modules at a time,
one thread each. A surviving mutant is a change to the code that no test notices: it is killed by a new test, or
explained in tests/mutation/equivalent.toml (why no test can tell it from the original). Mutants of type
annotations are skipped before they run: under `from __future__ import annotations` an annotation is a string
that nothing evaluates, so such a mutant is the same program. The report lists every survivor with its
explanation, and the script exits 1 while any is unexplained. It takes tens of minutes on 2 cores, too long for
CI: the report says at which commit and on which day each module last ran.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "mutation.md"
EXPLAINED = ROOT / "tests" / "mutation" / "equivalent.toml"
RESULTS = ROOT / "tests" / "mutation" / "results.json"
PY = Path(sys.executable)
# module (its path under src/rlvr, without .py) -> the tests that cover it (besides its own doctests). The rows of
# docs/mutation.md say which have run, at which commit; a module listed here without a row has not run yet (at
# ~5-15 s a mutant with their tests on 2 cores, each is an hour or more: run them one or two at a time).
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
                  "tests/train/test_step.py"],
    "ppo/gae": ["tests/ppo/test_gae.py", "tests/ppo/test_trainer.py"],
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modules", nargs="+", choices=list(MODULES), default=list(MODULES))
    p.add_argument("--report", action="store_true", help="only write the report again, from the last results and "
                   "the explanations as they are now (after explaining a survivor)")
    args = p.parse_args()
    if args.report:
        unexplained = write_report(json.loads(RESULTS.read_text()))
        print(f"report: {REPORT} ({unexplained} unexplained survivors)")
        return 1 if unexplained else 0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="rlvr-mutate-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), "HEAD"], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            with ThreadPoolExecutor(2) as pool:
                found = dict(zip(args.modules, pool.map(lambda m: run_module(m, tree, Path(tmp)), args.modules)))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results.update({m: {**r, "commit": commit, "date": date.today().isoformat()} for m, r in found.items()})
    RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    unexplained = write_report(results)
    print(f"report: {REPORT} ({unexplained} unexplained survivors)")
    return 1 if unexplained else 0


def run_module(module: str, tree: Path, tmp: Path) -> dict[str, object]:
    """cosmic-ray on src/rlvr/{module}.py in `tree`: {"mutants", "killed", "skipped", "survivors": [...]}."""
    path = f"src/rlvr/{module}.py"
    tests = " ".join([f"--doctest-modules {path}", *MODULES[module]])
    # (the suite's import mode: a test module may import another's helpers, as tests/ppo/test_trainer.py does)
    command = (f"env PYTHONPATH={tree / 'src'} OMP_NUM_THREADS=1 {PY} -m pytest -x -q -p no:cacheprovider "
               f"-o addopts= --import-mode=importlib -W ignore {tests}")
    name = module.replace("/", ".")  # (rl/update: one file in tmp)
    config, session = tmp / f"{name}.toml", tmp / f"{name}.sqlite"
    config.write_text(f'[cosmic-ray]\nmodule-path = "{path}"\ntimeout = 120.0\nexcluded-modules = []\n'
                      f'test-command = {json.dumps(command)}\n\n[cosmic-ray.distributor]\nname = "local"\n')
    cosmic = PY.with_name("cosmic-ray")
    subprocess.run([str(cosmic), "init", str(config), str(session)], cwd=tree, check=True)
    skipped = skip_annotations(session, tree / path)
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


def survivor(item: dict, result: dict, source: Path) -> dict[str, object]:
    """A surviving mutant as the report shows it: where, the operator, the line before and after."""
    mutation = item["mutations"][0]
    line = mutation["start_pos"][0]
    diff = [d for d in (result.get("diff") or "").splitlines() if d.startswith(("-", "+")) and d[1:2] not in "-+"]
    return {"line": line, "function": mutation.get("definition_name"), "operator": mutation["operator_name"],
            "before": source.read_text().splitlines()[line - 1].strip(),
            "after": next((d[1:].strip() for d in diff if d.startswith("+")), "")}


def write_report(results: dict[str, dict]) -> int:
    """docs/mutation.md from the results; the number of survivors without an explanation."""
    explained = tomllib.loads(EXPLAINED.read_text()).get("equivalent", []) if EXPLAINED.exists() else []
    lines = ["# Mutation testing", "",
             "`make mutate` (scripts/mutate.py) mutates the maths and the step's composition with cosmic-ray and runs "
             "the tests that cover each module against every mutant. A survivor is a change no test notices: each one "
             "below is explained as equivalent (tests/mutation/equivalent.toml), or the run fails. Mutants of type "
             "annotations are skipped (strings under `from __future__ import annotations`).", "",
             "| module | last run | mutants | killed | skipped (annotations) | survived, explained | unexplained |",
             "|---|---|---|---|---|---|---|"]
    unexplained_total, detail = 0, []
    for module, r in sorted(results.items()):
        why = [(s, reason(module, s, explained)) for s in r["survivors"]]
        unexplained = sum(1 for _, w in why if w is None)
        unexplained_total += unexplained
        lines.append(f"| `rlvr/{module}.py` | {r['date']}, {r['commit']} | {r['mutants']} | {r['killed']} | "
                     f"{r['skipped']} | {len(why) - unexplained} | {unexplained} |")
        for s, w in why:
            detail.append(f"- `rlvr/{module}.py:{s['line']}` ({s['function']}, {s['operator']}): `{s['before']}` → "
                          f"`{s['after']}`: {w or '**unexplained**'}")
    lines += ["", "## Survivors", "", *(detail or ["None."]), ""]
    REPORT.write_text("\n".join(lines))
    return unexplained_total


def reason(module: str, s: dict, explained: list[dict]) -> str | None:
    for e in explained:
        if e["module"] == module and e["before"] == s["before"] and e["after"] == s["after"]:
            return str(e["why"])
    return None


if __name__ == "__main__":
    sys.exit(main())
