"""The docs name everything the code offers: a new public name without docs fails.

Why a test: the docs drifted from the code one name at a time (14 public names and 17
of the client's methods were on no page). Every name is collected from the code when
the test runs, never from a hand list, so the test follows the public surface as it
changes: the public names (``__all__``) of ``adapter``, ``adapter.web``,
``adapter.acp``, ``adapter.testing`` and its public modules, the plugin's fixtures;
the public methods and properties of ``OpenCodeAdapter`` and ``OpenCodeClient``; the
fields of the public records and events; every ``opencode-tree`` subcommand and flag
(read from the real argparse parser); every route of the web app (read from the
Starlette app).

"Documented" means written as code (an inline code span or a fenced block) on a page
of ``docs/`` or in ``README.md``: a client method in ``docs/client.md``, an adapter
method in ``docs/adapter.md`` or ``docs/interrupt.md``, a record's field in a section
that names the record, a flag in its subcommand's section of ``docs/cli.md`` (a flag
every subcommand takes in "Common options"), a route as ``METHOD /path`` in
``docs/web.md``. A failure lists every missing name and where it comes from.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import itertools
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import msgspec

import adapter
from adapter import OpenCodeAdapter, OpenCodeClient
from tests.test_public_api import PUBLIC_MODULES as TYPED_MODULES

CHECKOUT = Path(adapter.__file__).resolve().parent.parent
DOCS = CHECKOUT / "docs"

#: Modules whose ``__all__`` is public; each name must be on some page.
PUBLIC_MODULES = (*TYPED_MODULES, "adapter.testing.pytest_plugin")

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_INLINE = re.compile(r"(`+)(.+?)\1", re.S)
_HEADING = re.compile(r"^#{1,6} ", re.M)


def pages() -> list[Path]:
    return [*sorted(DOCS.glob("*.md")), CHECKOUT / "README.md"]


def code_of(markdown: str) -> str:
    """The text written as code: fenced blocks and inline spans, one per line."""
    blocks = _FENCE.findall(markdown)
    prose = _FENCE.sub("", markdown)
    return "\n".join([*blocks, *(m.group(2) for m in _INLINE.finditer(prose))])


@cache
def page_code(name: str) -> str:
    return code_of((DOCS / name).read_text() if name != "README.md" else _readme())


def _readme() -> str:
    return (CHECKOUT / "README.md").read_text()


@cache
def all_code() -> str:
    return "\n".join(code_of(page.read_text()) for page in pages())


@cache
def sections() -> list[tuple[str, str]]:
    """Every section of every page (a heading to the next), as (title, its code)."""
    found: list[tuple[str, str]] = []
    for page in pages():
        text = page.read_text()
        starts = [m.start() for m in _HEADING.finditer(text)]
        bounds = [0, *starts, len(text)]
        for start, end in itertools.pairwise(bounds):
            chunk = text[start:end]
            title = chunk.splitlines()[0] if chunk else ""
            found.append((f"{page.name}: {title}", code_of(chunk)))
    return found


def mentions(code: str, name: str) -> bool:
    """``name`` as a whole identifier (``stop`` is not in ``stop_tree``)."""
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", code) is not None


# -- what the code offers ------------------------------------------------------


def public_names() -> Iterator[tuple[str, str]]:
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            yield f"{module_name}.__all__", name


def public_members(cls: type) -> list[str]:
    """The public methods and properties a class defines or inherits (not ``object``'s)."""
    return sorted(
        name
        for name, _ in inspect.getmembers(cls)
        if not name.startswith("_") and not hasattr(object, name)
    )


def records() -> Iterator[tuple[str, type]]:
    """The public records and events: dataclasses and msgspec structs of public modules."""
    seen: set[type] = set()
    for module_name in ("adapter", "adapter.web"):
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if is_record(value) and value not in seen:
                seen.add(value)
                yield name, value


def is_record(value: object) -> bool:
    return isinstance(value, type) and (
        dataclasses.is_dataclass(value)
        or (issubclass(value, msgspec.Struct) and value is not msgspec.Struct)
    )


def fields_of(cls: type) -> list[str]:
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls)]
    else:
        names = [f.name for f in msgspec.structs.fields(cls)]
    return [name for name in names if not name.startswith("_")]


def own_fields(cls: type) -> list[str]:
    """The fields ``cls`` adds to its public record bases (``Event.turn_id`` is
    checked once, on ``Event``, not on every event)."""
    inherited = {
        field
        for base in cls.__mro__[1:]
        if is_record(base) and not base.__name__.startswith("_")
        for field in fields_of(base)
    }
    return [field for field in fields_of(cls) if field not in inherited]


def cli_parser() -> argparse.ArgumentParser:
    """The real parser of ``opencode-tree`` (the one seam of the CLI read here)."""
    from adapter.cli import _parser

    return _parser()


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {
        option
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
        for option in action.option_strings
    }


def web_routes() -> list[tuple[str, str]]:
    """(method, path) of every route of the app ``create_app`` builds (HEAD left out:
    Starlette adds it to every GET)."""
    from starlette.routing import Mount, Route

    from adapter.web import create_app

    oc = OpenCodeAdapter("http://127.0.0.1:9")  # nothing is sent: the app is only built
    routes: list[tuple[str, str]] = []
    for route in create_app(oc).routes:
        if isinstance(route, Route):
            methods = sorted((route.methods or set()) - {"HEAD"})
            routes += [(method, route.path) for method in methods]
        elif isinstance(route, Mount):
            routes.append(("GET", route.path + "/{path}"))
    return routes


def route_pattern(method: str, path: str) -> re.Pattern[str]:
    """``GET /threads/{thread_id}`` as the docs write it: any name for a parameter,
    in ``{}`` or ``<>``."""
    parts = re.split(r"\{[^}]*\}", path)
    param = r"(?:\{[^}\s]*\}|<[^>\s]*>)"
    return re.compile(re.escape(method) + r"\s+" + param.join(map(re.escape, parts)) + r"(?![\w/])")


# -- the checks ----------------------------------------------------------------


def missing_public_names() -> list[str]:
    code = all_code()
    return [
        f"{name}  (from {source}; on no page of docs/ or README.md)"
        for source, name in public_names()
        if not mentions(code, name)
    ]


def missing_members() -> list[str]:
    wanted = {
        OpenCodeClient: ("client.md",),
        OpenCodeAdapter: ("adapter.md", "interrupt.md"),
    }
    missing: list[str] = []
    for cls, where in wanted.items():
        code = "\n".join(page_code(page) for page in where)
        missing += [
            f"{cls.__name__}.{name}  (a public member; not in docs/{' or docs/'.join(where)})"
            for name in public_members(cls)
            if not mentions(code, name)
        ]
    return missing


def missing_fields() -> list[str]:
    missing: list[str] = []
    for name, cls in records():
        near = [code for _, code in sections() if mentions(code, name)]
        if not near:
            continue  # the record itself is missing: reported with the public names
        missing += [
            f"{name}.{field}  (a field; in no docs section that names {name})"
            for field in own_fields(cls)
            if not any(mentions(code, field) for code in near)
        ]
    return missing


def cli_sections() -> dict[str, str]:
    """docs/cli.md's sections by subcommand (``opencode-tree NAME`` in the heading),
    ``""`` for "Common options"."""
    text = (DOCS / "cli.md").read_text()
    found: dict[str, str] = {}
    for chunk in re.split(r"^(?=## )", text, flags=re.M):
        title = chunk.splitlines()[0] if chunk else ""
        if title.startswith("## Common options"):
            found[""] = code_of(chunk)
        elif m := re.match(r"## `opencode-tree (\w+)", title):
            found[m.group(1)] = code_of(chunk)
    return found


def missing_cli() -> list[str]:
    documented = cli_sections()
    commands = subcommands()
    common = set.intersection(*(flags(p) for p in commands.values()))
    missing = [
        f"`--{flag[2:]}`  (a flag every subcommand takes; not in docs/cli.md, Common options)"
        for flag in sorted(common)
        if not mentions(documented.get("", ""), flag)
    ]
    for name, parser in commands.items():
        if name not in documented:
            missing.append(f"opencode-tree {name}  (a subcommand; no section in docs/cli.md)")
            continue
        missing += [
            f"opencode-tree {name} {flag}  (a flag; not in its docs/cli.md section)"
            for flag in sorted(flags(parser) - common)
            if not mentions(documented[name], flag)
        ]
    return missing


def missing_routes() -> list[str]:
    code = page_code("web.md")
    return [
        f"{method} {path}  (a route of adapter.web.create_app; not in docs/web.md)"
        for method, path in web_routes()
        if not route_pattern(method, path).search(code)
    ]


def broken_tables() -> list[str]:
    """Tables a Markdown renderer would not show as written: a row with another number
    of cells than its header, or rows without a header and separator line (a blank
    line inside a table cuts it in two)."""
    cell = re.compile(r"(?<!\\)\|")
    broken: list[str] = []
    for page in pages():
        rows: list[tuple[int, str]] = []
        in_fence = False
        for number, line in enumerate([*page.read_text().splitlines(), ""], 1):
            if line.startswith("```"):
                in_fence = not in_fence
            if not in_fence and line.startswith("|"):
                rows.append((number, line))
                continue
            if rows:
                first = rows[0][0]
                if len(rows) < 2 or not re.fullmatch(r"\|[\s:|-]+\|", rows[1][1]):
                    broken.append(f"{page.name}:{first}  (a table without a header line)")
                header = len(cell.findall(rows[0][1]))
                broken += [
                    f"{page.name}:{n}  ({len(cell.findall(row)) - 1} cells, header {header - 1})"
                    for n, row in rows
                    if len(cell.findall(row)) != header
                ]
            rows = []
    return broken


#: Pages for users of the library, which name no private module (``adapter/_x.py``,
#: ``adapter._x``): those move without notice. The others are about the code itself:
#: architecture.md (its map), benchmarks.md, compatibility.md (how to widen the tested
#: range), testing.md (contributing to the test kit).
USER_PAGES = (
    "README.md",
    "acp.md",
    "adapter.md",
    "cli.md",
    "client.md",
    "interrupt.md",
    "reliability.md",
    "security.md",
    "stop-tree.md",
    "web.md",
)
_PRIVATE = re.compile(r"adapter(?:[./][a-z_]+)*[./]_[a-z]\w*")


def private_module_names() -> list[str]:
    found: list[str] = []
    for name in USER_PAGES:
        text = _readme() if name == "README.md" else (DOCS / name).read_text()
        for number, line in enumerate(text.splitlines(), 1):
            found += [f"{name}:{number}  {m.group(0)}" for m in _PRIVATE.finditer(line)]
    return found


def report(missing: list[str]) -> str:
    return f"{len(missing)} undocumented:\n  " + "\n  ".join(missing)


# -- the tests -----------------------------------------------------------------


def test_every_public_name_is_documented() -> None:
    missing = missing_public_names()
    assert not missing, report(missing)


def test_every_method_of_the_adapter_and_the_client_is_documented() -> None:
    missing = missing_members()
    assert not missing, report(missing)


def test_every_field_of_a_public_record_is_documented() -> None:
    missing = missing_fields()
    assert not missing, report(missing)


def test_every_subcommand_and_flag_is_documented() -> None:
    missing = missing_cli()
    assert not missing, report(missing)


def test_every_web_route_is_documented() -> None:
    missing = missing_routes()
    assert not missing, report(missing)


def test_every_table_is_well_formed() -> None:
    broken = broken_tables()
    assert not broken, f"{len(broken)} broken tables:\n  " + "\n  ".join(broken)


def test_no_user_page_names_a_private_module() -> None:
    found = private_module_names()
    assert not found, f"{len(found)} private module names:\n  " + "\n  ".join(found)


# -- the checks can fail -------------------------------------------------------


def test_a_name_on_no_page_is_reported() -> None:
    assert not mentions(all_code(), "surely_no_page_names_this")
    assert mentions("`stop_tree(client, id)`", "stop_tree")
    assert not mentions("`stop_tree(client, id)`", "stop")


def test_the_collectors_find_what_the_code_offers() -> None:
    """The lists are read from the code: they hold what the issue names, so an empty
    list cannot pass for a documented one."""
    assert ("adapter.__all__", "ServerExitedError") in set(public_names())
    assert {"abort", "children", "event_stream", "is_closed"} <= set(public_members(OpenCodeClient))
    assert {"interrupt_turn", "send_turn"} <= set(public_members(OpenCodeAdapter))
    by_name = dict(records())
    assert "usage" in fields_of(by_name["PartialResult"])
    assert "turn_id" in fields_of(by_name["TreeNode"])
    assert "mcp_errors" in fields_of(by_name["ServerInventory"])
    assert {"tree", "stop", "run", "demo", "web", "acp", "inventory"} <= set(subcommands())
    assert "--timeout" in flags(subcommands()["tree"])
    assert ("POST", "/threads/{thread_id}/stop") in web_routes()
    assert route_pattern("POST", "/threads/{thread_id}/stop").search("POST /threads/{id}/stop")
    assert not route_pattern("POST", "/threads/{thread_id}").search("POST /threads/{id}/stop")
