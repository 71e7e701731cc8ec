"""The shape of the package: which modules sit at the top, and that imports point one way.

Every `import rlve...` in the source counts, including those inside functions (a lazy import is
still a dependency). Two graphs are checked for cycles: modules (each .py file, a package's
`__init__` under the package's name) and parts (`rlve.envs` with everything under it, or a
top-level module such as `rlve.loop`).
"""

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "rlve"

TOP_LEVEL_MODULES = {"__init__", "train", "serve", "types", "loop", "evaluation"}
PACKAGES = {
    "algorithms",
    "training",
    "models",
    "inference",
    "sync",
    "rollout",
    "curriculum",
    "envs",
    "cli",
    "experiments",
    "config",
    "distributed",
    "reliability",
    "configs",  # Hydra's yaml files: package data, no Python
}


def part_of(module: str) -> str:
    """`rlve.envs.gym.sources` -> `rlve.envs`; `rlve.loop` -> `rlve.loop`; `rlve` -> `rlve`."""
    return ".".join(module.split(".")[:2])


def module_files() -> dict[str, Path]:
    """`rlve.envs.gym.sources` -> its file, `rlve.envs` -> rlve/envs/__init__.py, ..."""
    files = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported_modules(path: Path) -> set[str]:
    """Every rlve name the file imports: `from a.b import c` gives a.b and a.b.c (c may be a
    module); names that are no module are filtered out by the caller."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "rlve" or m.startswith("rlve.")}


def module_graph() -> dict[str, set[str]]:
    """module -> the rlve modules it imports."""
    files = module_files()
    return {
        name: {m for m in imported_modules(path) if m in files and m != name}
        for name, path in files.items()
    }


def part_graph() -> dict[str, set[str]]:
    """part -> the parts it imports (itself and the root package `rlve` left out)."""
    graph: dict[str, set[str]] = {}
    for module, targets in module_graph().items():
        edges = graph.setdefault(part_of(module), set())
        edges.update(part_of(t) for t in targets if part_of(t) not in (part_of(module), "rlve"))
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_top_of_the_package_holds_only_the_named_modules_and_packages():
    modules = {p.stem for p in ROOT.glob("*.py")}
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert modules == TOP_LEVEL_MODULES
    assert folders == PACKAGES


def test_every_package_says_what_lives_there_and_what_it_may_import():
    for init in ROOT.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in doc.lower() and len(doc.split()) >= 30, (
            f"{init}: what lives here, what it imports"
        )
    for init in ROOT.glob("*/*/__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} has no docstring"


def test_no_import_cycle_between_modules():
    assert find_cycle(module_graph()) is None


def test_no_import_cycle_between_parts():
    assert find_cycle(part_graph()) is None


@pytest.mark.parametrize(
    ("low", "high"),
    [
        ("rlve.algorithms", "rlve.training"),
        ("rlve.config", "rlve.loop"),
        ("rlve.types", "rlve.rollout"),
        ("rlve.curriculum", "rlve.rollout"),
        ("rlve.inference", "rlve.rollout"),
        ("rlve.sync", "rlve.inference"),
        ("rlve.envs", "rlve.evaluation"),
        ("rlve.reliability", "rlve.training"),
    ],
)
def test_dependencies_point_down(low, high):
    """A lower layer never reaches, even indirectly, a layer above it."""
    seen = reachable(part_graph(), low)
    assert high not in seen, f"{low} depends on {high}"
    assert "rlve.cli" not in seen
    assert "rlve.experiments" not in seen


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """`start` and every part it imports, directly or not."""
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_nothing_but_the_entry_points_imports_the_cli():
    graph = part_graph()
    importers = sorted(n for n, targets in graph.items() if "rlve.cli" in targets)
    assert importers == []


def test_the_experiments_sit_between_the_cli_and_the_library():
    """cli > experiments > the rest: a command may run an experiment (`make demo` runs the
    recipe), an experiment never reaches a command, and the library imports neither."""
    graph = part_graph()
    assert "rlve.cli" not in reachable(graph, "rlve.experiments")
    importers = sorted(n for n, targets in graph.items() if "rlve.experiments" in targets)
    assert importers == ["rlve.cli"]


@pytest.mark.parametrize(
    "dotted",
    [
        "rlve.load_environment",
        "rlve.list_environments",
        "rlve.evaluate",
        "rlve.EvalResult",
        "rlve.ScriptedEngine",
        "rlve.rollout.ScriptedEngine",
        "rlve.envs.tictactoe.minimax_policy",
        "rlve.envs.tictactoe.random_policy",
        "rlve.algorithms.group_advantages",
        "rlve.algorithms.policy_loss",
        "rlve.algorithms.LOSSES",
        "rlve.curriculum.DifficultyController",
        "rlve.evaluation.evaluation_jobs",  # the module is no longer hidden by rlve.evaluate
    ],
)
def test_public_names_users_import_still_resolve(dotted):
    module_name, _, attr = dotted.rpartition(".")
    assert hasattr(importlib.import_module(module_name), attr)


def test_the_scripted_engine_is_one_class_under_its_three_names():
    from rlve import ScriptedEngine
    from rlve.inference.scripted import ScriptedEngine as defined
    from rlve.rollout import ScriptedEngine as rollout_export

    assert ScriptedEngine is defined is rollout_export
