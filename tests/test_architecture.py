"""The package's shape: a plan a reader sees from the folder names, and no import back up.

``docs/architecture.md`` draws the layers and says what each package is for; these tests
read its layer table and check the tree against it, so the page and the code cannot drift.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "adapter"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

MAX_LINES = 800  # no room over 800 lines: the package, its tests, benchmarks and scripts
MAX_TOP_LEVEL = 25

#: The concept modules and the only concept modules each may import: the registry is below
#: all of them, the facade (``_adapter``) above all of them.
CONCEPTS: dict[str, set[str]] = {
    "_threads._registry": set(),
    "_stream._pump": set(),
    "_threads._session_owners": {"_threads._registry"},
    "_requests._pending": {"_threads._registry"},
    "_stream._native_recorder": {"_threads._registry"},
    "_stream._output": {"_threads._registry", "_threads._session_owners", "_requests._pending"},
    "_stream._turn_diff": {"_threads._registry"},
    "_turns._settling": {"_threads._registry", "_stream._output", "_stream._turn_diff"},
    "_turns._adoption": {
        "_threads._registry",
        "_threads._session_owners",
        "_stream._output",
        "_turns._settling",
    },
    "_turns._running": {
        "_threads._registry",
        "_stream._output",
        "_turns._settling",
        "_turns._adoption",
    },
    "_stream._translator": {
        "_threads._registry",
        "_threads._session_owners",
        "_requests._pending",
        "_stream._output",
        "_stream._turn_diff",
        "_turns._running",
    },
    "_stop._interrupt": {
        "_threads._registry",
        "_threads._session_owners",
        "_requests._pending",
        "_turns._running",
    },
    "_stream._pump_sink": {"_threads._registry", "_requests._pending", "_turns._running"},
}

#: Imports that point up a layer, allowed for an annotation only (docs/architecture.md).
TYPE_ONLY_UPWARD = {
    ("adapter._exceptions", "adapter._types._stop_report"),
    ("adapter._exceptions", "adapter._types._partial_result"),
}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path) -> dict[str, bool]:
    """The ``adapter`` modules a module imports -> whether only for typing."""
    tree = ast.parse(path.read_text())
    package = path.parent.relative_to(ROOT).as_posix().replace("/", ".")
    typing_only = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_type_checking(node)
        for stmt in node.body
        for child in ast.walk(stmt)
    }
    found: dict[str, bool] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom | ast.Import):
            continue
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            targets.append(module)
            if node.module is None:  # ``from . import _x``: the names are modules
                targets += [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            targets.append(node.module)
        elif isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        for target in targets:
            if target == "adapter" or target.startswith("adapter."):
                found[target] = found.get(target, True) and id(node) in typing_only
    return found


def module_name(path: Path) -> str:
    name = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
    return name.removesuffix(".__init__")


def modules() -> dict[str, dict[str, bool]]:
    return {module_name(path): imports_of(path) for path in PACKAGE.rglob("*.py")}


def top_level_entries() -> set[str]:
    return {
        p.name + ("/" if p.is_dir() else "")
        for p in PACKAGE.iterdir()
        if p.name != "__pycache__" and not p.name.startswith(".")
    }


def layers() -> dict[str, int]:
    """docs/architecture.md's layer table: entry (``_client/``, ``_adapter.py``) -> layer."""
    rows = re.findall(r"^\| (\d+) [a-z ]+ \| (.+) \|$", ARCHITECTURE.read_text(), re.MULTILINE)
    assert rows, "docs/architecture.md has no layer table"
    table: dict[str, int] = {}
    for number, entries in rows:
        for entry in re.findall(r"`([^`]+)`", entries):
            assert entry not in table, f"{entry} is in two layers"
            table[entry] = int(number)
    return table


def entry_of(module: str) -> str:
    """The top-level entry of ``adapter`` a module lives in, as the table spells it."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    top = parts[1]
    return f"{top}/" if (PACKAGE / top).is_dir() else f"{top}.py"


def test_the_package_imports_form_no_cycle() -> None:
    graph = modules()
    # A module's own package __init__ is a facade above it, not a dependency; the allowed
    # annotation-only imports up a layer are no dependency at run time either.
    edges = {
        m: {
            d
            for d, type_only in deps.items()
            if d in graph
            and d != m
            and d != "adapter"
            and not (type_only and (m, d) in TYPE_ONLY_UPWARD)
        }
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


def test_the_top_level_shows_the_plan_in_at_most_25_entries() -> None:
    assert len(top_level_entries()) <= MAX_TOP_LEVEL, sorted(top_level_entries())


def test_every_top_level_entry_is_in_exactly_one_layer_of_the_architecture_page() -> None:
    table = layers()
    assert set(table) == top_level_entries()


def test_every_package_has_a_paragraph_on_the_architecture_page() -> None:
    headings = " ".join(re.findall(r"^### (.+)$", ARCHITECTURE.read_text(), re.MULTILINE))
    packages = {entry for entry in top_level_entries() if entry.endswith("/")}
    assert {entry for entry in packages if f"`{entry}`" not in headings} == set()


def test_every_import_points_to_the_same_layer_or_below() -> None:
    table = layers()
    upward: list[str] = []
    for module, deps in modules().items():
        here = table[entry_of(module)]
        for dep, type_only in deps.items():
            if dep == "adapter" or table[entry_of(dep)] <= here:
                continue
            if type_only and (module, dep) in TYPE_ONLY_UPWARD:
                continue
            upward.append(f"{module} -> {dep}")
    assert upward == []


def test_concept_modules_import_only_what_is_below_them() -> None:
    graph = modules()
    for concept, allowed in CONCEPTS.items():
        imported = {d.removeprefix("adapter.") for d in graph[f"adapter.{concept}"]}
        others = imported & (set(CONCEPTS) | {"_adapter"})
        assert others <= allowed, f"{concept} imports {sorted(others - allowed)}"


def test_nothing_below_the_facade_imports_it() -> None:
    for module, deps in modules().items():
        if module in ("adapter", "adapter._adapter") or module.startswith("adapter.cli"):
            continue
        assert "adapter._adapter" not in deps, f"{module} imports the facade"


def test_the_exceptions_import_no_algorithm() -> None:
    assert set(modules()["adapter._exceptions"]) <= {
        "adapter._types._stop_report",
        "adapter._types._partial_result",
    }


def test_no_module_is_over_800_lines_tests_benchmarks_and_scripts_included() -> None:
    sizes = {
        path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
        for folder in (PACKAGE, ROOT / "tests", ROOT / "benchmarks", ROOT / "scripts")
        for path in folder.rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


#: Each part of a thread's state, and the one module that changes it
#: (``adapter/_threads/_thread_state.py``).
THREAD_PARTS: dict[str, str] = {
    "subagents": "_subagent_tasks",
    "tree": "_session_owners",
    "requests": "_pending",
    "interrupts": "_interrupt",
    "submission": "_running",
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
        for node in ast.walk(ast.parse((PACKAGE / "_threads" / "_thread_state.py").read_text()))
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


def layer_paragraphs() -> Iterator[tuple[Path, str]]:
    """Each layer's package (``adapter/_x/``) and its ``### `_x/``` paragraph on the page."""
    text = ARCHITECTURE.read_text()
    for package in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and p.name.startswith("_")):
        if package.name == "__pycache__":
            continue
        yield package, text.split(f"### `{package.name}/`", 1)[1].split("\n### ", 1)[0]


def test_every_module_of_a_concept_package_is_named_in_its_paragraph() -> None:
    """The page says what each module of ``_base/`` ... ``_stop/`` is for, so a new one
    is placed and described, not dropped in."""
    unnamed: list[str] = []
    for package, paragraph in layer_paragraphs():
        unnamed += [
            f"{package.name}/{module.name}"
            for module in sorted(package.glob("_*.py"))
            if module.name != "__init__.py" and f"`{module.stem}`" not in paragraph
        ]
    assert unnamed == []


def test_every_package_docstring_names_its_modules() -> None:
    """A package's ``__init__`` says what each of its modules is for, by name (as the
    page does for the layers' packages), so a reader routes from the package to the
    module without opening them all."""
    unnamed: list[str] = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        if "__pycache__" in init.parts:
            continue
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        package = init.parent.relative_to(PACKAGE.parent).as_posix()
        for module in sorted(init.parent.glob("*.py")):
            if module.name == "__init__.py":
                continue
            if not re.search(rf"`{re.escape(module.stem)}\b", docstring):
                unnamed.append(f"{package}/{module.name}")
        for sub in sorted(d for d in init.parent.iterdir() if (d / "__init__.py").exists()):
            if not re.search(rf"`{re.escape(sub.name)}\b", docstring):
                unnamed.append(f"{package}/{sub.name}/")
    assert unnamed == [], "modules no package docstring names:\n" + "\n".join(unnamed)


def test_each_layer_package_docstring_names_the_modules_its_paragraph_names() -> None:
    """``adapter/_x/__init__.py`` and ``docs/architecture.md``'s ``_x/`` paragraph route
    to the same modules: the page is the map, the docstring the map at hand."""
    differ: list[str] = []
    for package, paragraph in layer_paragraphs():
        docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        on_page = set(re.findall(r"`(_[a-z_]+)`", paragraph))
        in_docstring = set(re.findall(r"``(_[a-z_]+)``", docstring))
        modules = {m.stem for m in package.glob("_*.py") if m.name != "__init__.py"}
        if on_page & modules != in_docstring & modules:
            differ.append(
                f"{package.name}: page {sorted(on_page & modules)}, "
                f"docstring {sorted(in_docstring & modules)}"
            )
    assert differ == []
