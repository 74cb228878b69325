"""docs/adapter.md's table of T3 Code's provider contract stays honest.

The section "T3 Code's provider contract, row by row" maps each of T3 Code's adapter
methods, provider snapshot fields and runtime event types to this adapter. Its tables
have the T3 name in the first column and this adapter's names, in backticks, in the
second. This test reads them and checks:

- every method (`name()`), event type (`turn.started`) and field (`Class.field`) named in
  the adapter column exists: a method on ``OpenCodeAdapter``, an event type in the
  ``AnyEvent`` union, a field of a public class of ``adapter``; so do the methods and
  fields the notes column names (its dotted names may be OpenCode's native events);
- every method and event type of T3 Code's contract (``T3_METHODS``, ``T3_EVENT_TYPES``,
  copied from the files the section cites) has a row.

A name the table gives before its feature exists goes in ``PENDING``, and the test asserts
it still does **not** exist; when the feature lands the test fails on its name, which then
leaves ``PENDING``. Every name the table gives has landed: ``PENDING`` is empty, so every name
in the table is checked.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest

import adapter
from adapter import AnyEvent, OpenCodeAdapter

DOC = Path(__file__).parent.parent / "docs" / "adapter.md"
HEADING = "## T3 Code's provider contract, row by row"

#: Names that the table uses before they exist (see the module docstring).
PENDING: frozenset[str] = frozenset()

#: ``ProviderAdapterShape`` in t3code's apps/server/src/provider/Services/ProviderAdapter.ts:
#: the members every stored version read has.
T3_METHODS = frozenset(
    {
        "startSession",
        "sendTurn",
        "interruptTurn",
        "respondToRequest",
        "respondToUserInput",
        "stopSession",
        "listSessions",
        "hasSession",
        "readThread",
        "rollbackThread",
        "stopAll",
        "streamEvents",
    }
)

#: ``ProviderRuntimeEventType`` (and ``tool.denied``, in the event union only) in t3code's
#: packages/contracts/src/providerRuntime.ts.
T3_EVENT_TYPES = frozenset(
    {
        "session.started",
        "session.configured",
        "session.state.changed",
        "session.exited",
        "session.health",
        "thread.started",
        "thread.state.changed",
        "thread.metadata.updated",
        "thread.token-usage.updated",
        "thread.realtime.started",
        "thread.realtime.item-added",
        "thread.realtime.audio.delta",
        "thread.realtime.error",
        "thread.realtime.closed",
        "turn.started",
        "turn.completed",
        "turn.aborted",
        "turn.plan.updated",
        "turn.proposed.delta",
        "turn.proposed.completed",
        "turn.diff.updated",
        "item.started",
        "item.updated",
        "item.completed",
        "content.delta",
        "request.opened",
        "request.resolved",
        "user-input.requested",
        "user-input.resolved",
        "task.started",
        "task.progress",
        "task.updated",
        "task.completed",
        "hook.started",
        "hook.progress",
        "hook.completed",
        "tool.progress",
        "tool.summary",
        "tool.denied",
        "auth.status",
        "account.updated",
        "account.rate-limits.updated",
        "mcp.status.updated",
        "mcp.oauth.completed",
        "model.rerouted",
        "config.warning",
        "deprecation.notice",
        "files.persisted",
        "runtime.warning",
        "runtime.error",
    }
)

_CODE = re.compile(r"`([^`]+)`")
_METHOD = re.compile(r"^([a-z_]+)\(")
_EVENT_TYPE = re.compile(r"^[a-z-]+(\.[a-z_-]+)+$")
_FIELD = re.compile(r"^([A-Z]\w*)\.(\w+)$")
_T3_MEMBER = re.compile(r"^([a-z][A-Za-z]*)\??(\(|$)")


def _rows() -> list[list[str]]:
    """The cells of every body row of the section's tables."""
    text = DOC.read_text(encoding="utf-8")
    assert HEADING in text, f"docs/adapter.md has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if set(cells[0]) <= set("-: ") or cells[0] == "T3 Code":
            continue  # the separator and the header
        rows.append(cells)
    return rows


def _adapter_names(cell: str) -> list[str]:
    """This adapter's checkable names in a cell: `method()`, `event.type`, `Class.field`."""
    names = []
    for code in _CODE.findall(cell):
        method = _METHOD.match(code)
        if method:
            names.append(method.group(1) + "()")
        elif _EVENT_TYPE.match(code) or _FIELD.match(code):
            names.append(code)
    return names


def _named() -> set[str]:
    """Every checkable name of the tables: the adapter column's, the notes' methods and fields."""
    named = set()
    for cells in _rows():
        named.update(_adapter_names(cells[1]))
        named.update(n for n in _adapter_names(cells[2]) if not _EVENT_TYPE.match(n))
    return named


def _event_types() -> set[str]:
    return {
        str(next(f.default for f in dataclasses.fields(cls) if f.name == "type"))
        for cls in typing.get_args(AnyEvent)
    }


def _exists(name: str, event_types: set[str]) -> bool:
    if name.endswith("()"):
        return callable(getattr(OpenCodeAdapter, name[:-2], None))
    field = _FIELD.match(name)
    if field:
        cls = getattr(adapter, field.group(1), None)
        if cls is None:
            return False
        if dataclasses.is_dataclass(cls):
            return field.group(2) in {f.name for f in dataclasses.fields(cls)}
        return hasattr(cls, field.group(2))
    return name in event_types


def test_the_section_has_rows() -> None:
    rows = _rows()
    assert len(rows) >= len(T3_METHODS) + len(T3_EVENT_TYPES) // 2
    assert all(len(cells) == 3 for cells in rows), [c for c in rows if len(c) != 3]


def test_every_adapter_name_in_the_table_exists_unless_pending() -> None:
    event_types = _event_types()
    named = _named()
    missing = sorted(n for n in named - PENDING if not _exists(n, event_types))
    assert missing == [], f"named in the table but not in the adapter: {missing}"


def test_pending_names_are_used_and_not_yet_built() -> None:
    """A pending name that now exists must leave ``PENDING`` (the feature landed)."""
    event_types = _event_types()
    named = _named()
    assert sorted(PENDING - named) == [], "pending names the table does not use"
    landed = sorted(n for n in PENDING if _exists(n, event_types))
    assert landed == [], f"landed: remove from PENDING in {__name__}: {landed}"


def test_every_t3_method_has_a_row() -> None:
    firsts = {
        member.group(1)
        for cells in _rows()
        for code in _CODE.findall(cells[0])
        if (member := _T3_MEMBER.match(code))
    }
    assert sorted(T3_METHODS - firsts) == []


def test_every_t3_event_type_has_a_row() -> None:
    firsts = {code for cells in _rows() for code in _CODE.findall(cells[0])}
    assert sorted(T3_EVENT_TYPES - firsts) == []


@pytest.mark.parametrize(
    ("cell", "names"),
    [
        ("`start_session()` → `SessionInfo`", ["start_session()"]),
        ("`turn.usage` (`TurnUsage.context_tokens`)", ["turn.usage", "TurnUsage.context_tokens"]),
        ("— (`x-opencode-directory`, `once`)", []),
    ],
)
def test_cells_are_read_as_names(cell: str, names: list[str]) -> None:
    assert _adapter_names(cell) == names
