"""The package keeps its shape: imports point one way, files and functions stay small.

    pure maths and records ─▶ rollout, rewards, data, models ─▶ run core ─▶ train, sft, reward_models, ppo,
    evaluate, sample, dashboard ─▶ pipeline ─▶ the Python API (rlvr.api, rlvr.trl) ─▶ cli and the package root

(an arrow reads "is imported by"). Every import counts, at the top of a module or inside a function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60

LAYERS: list[tuple[str, ...]] = [
    ("rlvr.errors", "rlvr.console", "rlvr.deadline", "rlvr.lifeline", "rlvr.seeds", "rlvr.user_code", "rlvr.moved",
     "rlvr.config", "rlvr.records", "rlvr.advantages", "rlvr.kl", "rlvr.losses", "rlvr.correction", "rlvr.optim",
     "rlvr.paths", "rlvr.intact"),
    ("rlvr.data", "rlvr.models", "rlvr.rollout", "rlvr.graphed", "rlvr.prepacked", "rlvr.kv_room", "rlvr.logprobs",
     "rlvr.rewards", "rlvr.sandbox", "rlvr.envs", "rlvr.samplers", "rlvr.harness", "rlvr.adapters"),
    ("rlvr.distributed",),  # the ranks and the model spread over them, apart from the run loop
    ("rlvr.run",),
    ("rlvr.rl", "rlvr.sft", "rlvr.reward_models", "rlvr.evaluate", "rlvr.sample", "rlvr.dashboard", "rlvr.tinker"),
    ("rlvr.grpo", "rlvr.ppo"),  # peers on the policy-RL core (rlvr.rl)
    ("rlvr.pipeline",),
    ("rlvr.api", "rlvr.trl"),  # the Python front door: training and evaluation from Python, TRL's names
    ("rlvr.cli", "rlvr.__main__", "rlvr"),  # the command line, and the package's own lazy exports (rlvr.GRPO)
]


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SRC / "rlvr").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(module imported, line) for every rlvr import in the file, wherever it stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "rlvr":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            if base.split(".")[0] != "rlvr":
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                yield (target if target in known else base), node.lineno


def layer_of(module: str) -> int:
    """The layer of the longest listed name `module` is (or is inside); the root package only as itself."""
    names = [p for layer in LAYERS for p in layer if module == p or (p != "rlvr" and module.startswith(p + "."))]
    if not names:
        return -1
    best = max(names, key=len)
    return next(i for i, layer in enumerate(LAYERS) if best in layer)


def top_package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {name: dict(imports(name, path, known)) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    for name in modules():
        assert layer_of(name) >= 0, name


def test_imports_point_down_the_layers():
    wrong = [f"{source} (layer {layer_of(source)}) imports {target} (layer {layer_of(target)}) at line {line}"
             for source, targets in graph().items() for target, line in targets.items()
             if layer_of(target) > layer_of(source)]
    assert not wrong, "\n".join(wrong)


AGENT_CODE = ("rlvr.harness", "rlvr.adapters", "rlvr.envs")  # agents, adapters, environments and their driving


def agent_imports(package: str) -> list[str]:
    """Every import of agent, adapter or environment code by a module of `package`, as 'source imports target at
    line n', read from the AST (lazy imports inside functions included)."""
    return [f"{source} imports {target} at line {line}" for source, targets in graph().items()
            if top_package(source) == package for target, line in targets.items()
            if any(target == a or target.startswith(a + ".") for a in AGENT_CODE)]


def test_the_run_core_imports_no_agent_code():
    """rlvr.run (the policy handle, ranks, checkpoints, the rank's sampler) knows token ids and engines; the agents
    and environments that run over an engine are wrapped around it by the commands above
    (rlvr.harness.sampler.over_episodes)."""
    wrong = agent_imports("rlvr.run")
    assert not wrong, "\n".join(wrong)


def test_the_engines_import_no_environment_or_agent_code():
    """The engines (rlvr.samplers) know token ids only: sample, complete, weight pushes. Conversations with an
    environment (rlvr.envs.driven) and agents' runs (rlvr.harness) are driven over any of them."""
    wrong = agent_imports("rlvr.samplers")
    assert not wrong, "\n".join(wrong)


def test_no_module_cycles():
    found = cycles({source: set(targets) for source, targets in graph().items()})
    assert not found, "\n".join(" <-> ".join(c) for c in found)


def test_no_package_cycles():
    edges: dict[str, set[str]] = {}
    for source, targets in graph().items():
        for target in targets:
            if top_package(source) != top_package(target):
                edges.setdefault(top_package(source), set()).add(top_package(target))
    found = cycles(edges)
    assert not found, "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("path", sorted((SRC / "rlvr").rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_files_and_functions_are_small(path):
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_FILE_LINES, f"{path.name}: {len(text.splitlines())} lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            size = node.end_lineno - node.lineno + 1
            assert size <= MAX_FUNCTION_LINES, f"{path.name}:{node.lineno} {node.name} is {size} lines"


# what only the handles know: the wrapper types and their verbs (DDP, FSDP2, LoRA's adapters), by any use of the name
WRAPPER_NAMES = {"DistributedDataParallel", "FullyShardedDataParallel", "FSDPModule", "fully_shard", "no_sync",
                 "AdaptersOff", "unwrap", "spread", "merge_and_unload", "merge_adapter", "unmerge_adapter",
                 "disable_adapter"}
WRAPPER_HOMES = {"rlvr/distributed/parallel.py", "rlvr/run/policy.py", "rlvr/models/adapters.py"}
STRATEGIES = {"ddp", "fsdp"}  # distributed.strategy's values: the config declares them, distributed/parallel reads
STRATEGY_HOMES = WRAPPER_HOMES | {"rlvr/config/sections.py", "rlvr/trl/recorded.py"}  # (TRL's own field names)


def _uses(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) of every name, attribute, import and string constant in `tree` (not comments, not docstrings'
    words: a docstring is one string constant)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.alias):
            yield node.lineno, node.name.rsplit(".", 1)[-1]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, repr(node.value)


def test_only_the_policy_handle_knows_how_the_model_is_wrapped():
    """DDP, FSDP and LoRA's adapters live inside rlvr.run.policy (with rlvr.distributed.parallel and
    rlvr.models.adapters under it): no stage uses a wrapper type or verb (to branch on it, unwrap a model, fold
    LoRA), and none reads a strategy's name (rlvr.distributed.parallel.shards and REPLICATED say it)."""
    found = []
    for path in sorted((SRC / "rlvr").rglob("*.py")):
        where = str(path.relative_to(SRC))
        for line, what in _uses(ast.parse(path.read_text())):
            if (what in WRAPPER_NAMES and where not in WRAPPER_HOMES) or (
                    what.strip("'") in STRATEGIES and what.startswith("'") and where not in STRATEGY_HOMES):
                found.append(f"{where}:{line}: {what}")
    assert not found, "\n".join(found)


def test_the_wrapper_check_sees_uses_and_not_words():
    """The walk above finds an attribute call, an isinstance check, an import and a strategy string, and not the
    same words in a comment or a docstring."""
    code = ('"""merge_and_unload, ddp."""\nfrom torch.nn.parallel import DistributedDataParallel as D\n'
            "model = model.merge_and_unload()  # unwrap\nif isinstance(m, FSDPModule) or s == 'ddp': pass\n")
    seen = {what for _, what in _uses(ast.parse(code))}
    assert {"DistributedDataParallel", "merge_and_unload", "FSDPModule", "'ddp'"} <= seen
    assert "unwrap" not in seen
