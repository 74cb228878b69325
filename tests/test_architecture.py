"""The package's shape: one concept per module, and no module imports back up.

A reader should find where a change goes from the file names alone; these tests keep
the layering that makes that true (``docs/adapter.md``, "The event pump").
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "adapter"

#: The concept modules of the adapter, and the only concept modules each may import.
#: The core is below all of them; the facade (``_adapter``) is above all of them.
CONCEPTS: dict[str, set[str]] = {
    "_core": set(),
    "_pump": set(),
    "_ownership": {"_core"},
    "_requests": {"_core"},
    "_turns": {"_core"},
    "_translate": {"_core", "_ownership", "_requests", "_turns"},
    "_interrupt": {"_core", "_ownership", "_requests", "_turns"},
    "_recorder": {"_core"},
}

MAX_LINES = 800  # the bound


def imports_of(path: Path) -> set[str]:
    """The sibling modules (``adapter._x``) a module imports, at run time or for typing."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    package = path.parent.relative_to(PACKAGE.parent).as_posix().replace("/", ".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.add(target)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("adapter"):
            found.add(node.module)
    return found


def modules() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = path.relative_to(PACKAGE.parent).with_suffix("").as_posix().replace("/", ".")
        name = name.removesuffix(".__init__")
        graph[name] = imports_of(path)
    return graph


def test_the_package_imports_form_no_cycle() -> None:
    graph = modules()
    # A module's own package __init__ is a facade above it, not a dependency.
    edges = {
        m: {d for d in deps if d in graph and d != m and d != "adapter"}
        for m, deps in graph.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)


def test_concept_modules_import_only_what_is_below_them() -> None:
    graph = modules()
    for concept, allowed in CONCEPTS.items():
        imported = {d.removeprefix("adapter.") for d in graph[f"adapter.{concept}"]}
        others = imported & (set(CONCEPTS) | {"_adapter"})
        assert others <= allowed, f"{concept} imports {sorted(others - allowed)}"


def test_nothing_below_the_facade_imports_it() -> None:
    graph = modules()
    for module, deps in graph.items():
        if module in ("adapter", "adapter._adapter") or module.startswith("adapter.cli"):
            continue
        assert "adapter._adapter" not in deps, f"{module} imports the facade"


def test_the_exceptions_import_no_algorithm() -> None:
    assert modules()["adapter._exceptions"] <= {"adapter._stop_report"}


def test_no_module_is_a_monolith() -> None:
    sizes = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


#: Each part of a thread's state, and the one module that changes it (``adapter/_thread.py``).
THREAD_PARTS: dict[str, str] = {
    "tree": "_ownership",
    "requests": "_requests",
    "interrupts": "_interrupt",
    "submission": "_turns",
}
_MUTATORS = {"pop", "clear", "update", "setdefault", "popitem", "__setitem__", "__delitem__"}


def _written_part(node: ast.AST) -> str | None:
    """The thread part a statement changes (``x.<part>.<field> = ...``,
    ``x.<part>.<field>[k] = ...``, ``del ...``, ``x.<part>.<field>.pop(...)``)."""

    def part_of(target: ast.expr) -> str | None:
        while isinstance(target, ast.Subscript):
            target = target.value
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Attribute)
            and target.value.attr in THREAD_PARTS
        ):
            return target.value.attr
        return None

    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign | ast.Delete):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _MUTATORS
    ):
        targets = [node.func.value]
    for target in targets:
        found = part_of(target)
        if found is not None:
            return found
    return None


def test_each_part_of_a_thread_is_changed_by_its_own_concept_only() -> None:
    assert set(THREAD_PARTS) <= {
        node.target.id
        for node in ast.walk(ast.parse((PACKAGE / "_thread.py").read_text()))
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }, "the thread parts are fields of ThreadState"
    strays = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            part = _written_part(node)
            if part is not None and path.stem != THREAD_PARTS[part]:
                line = getattr(node, "lineno", 0)
                strays.append(f"{path.relative_to(PACKAGE)}:{line} changes {part}")
    assert strays == []


def _module_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def test_no_module_outside_testing_imports_a_private_testing_module() -> None:
    """The product stands alone: the CLI, the web app and the ACP agent use only the
    public ``adapter.testing`` names (``adapter.testing``, ``.fake``, ``.model``)."""
    offenders = sorted(
        f"{module} imports {dep}"
        for module, deps in modules().items()
        if not module.startswith("adapter.testing")
        for dep in deps
        if dep.startswith("adapter.testing.") and dep.split(".")[2].startswith("_")
    )
    assert offenders == []


def test_every_third_party_package_imported_is_declared() -> None:
    """Each distribution the package imports is in ``dependencies`` or a non-dev extra
    of ``pyproject.toml`` (a transitive install is not a promise)."""
    import re
    import sys
    import tomllib
    from importlib.metadata import packages_distributions

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra, listed in project["optional-dependencies"].items():
        if extra != "dev":
            requirements += listed
    declared = {re.split(r"[\s<>=!~\[;]", r, maxsplit=1)[0].lower() for r in requirements}
    distributions = packages_distributions()
    undeclared: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            for name in _module_names(node):
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in ("adapter", "__future__"):
                    continue
                names = {d.lower() for d in distributions.get(top, [top])}
                if not names & declared:
                    undeclared.add(f"{top} ({path.relative_to(PACKAGE.parent)})")
    assert sorted(undeclared) == []
