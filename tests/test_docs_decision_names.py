"""docs/adapter.md's table of permission decision names across the layers stays true.

The section "Open requests and their answers" maps each decision a host gives
``respond_to_request`` to OpenCode's reply, to what ``request.resolved`` says, to the ACP
agent's option, to the web backend's body and to its page's button. This test reads the
table and checks every cell against the code that speaks that name, and that the table
lists every decision each layer knows, so neither can change without the other.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from adapter._stream._vocabulary import DECISION_FOR_REPLY, permission_reply_for
from adapter.acp._requests import PERMISSION_OPTIONS
from adapter.web import _app as web_app

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs" / "adapter.md"
PAGE = ROOT / "adapter" / "web" / "static" / "app.js"
HEADING = "## Open requests and their answers"


def rows() -> list[list[str]]:
    """The decision table's body rows, cells stripped."""
    text = DOC.read_text()
    start = text.index(HEADING)
    section = text[start : text.index("\n## ", start + len(HEADING))]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    header, *body = lines
    assert header.startswith("| adapter `decision` |"), header
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in body]


def code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def quoted(cell: str) -> list[str]:
    return re.findall(r'"([^"]+)"', cell.replace("`", ""))


ROWS = rows()


def test_the_table_lists_every_decision_of_every_layer() -> None:
    decisions = {code(row[0])[0] for row in ROWS}
    assert decisions == set(DECISION_FOR_REPLY.values())
    assert decisions == {option.option_id for option in PERMISSION_OPTIONS}
    assert decisions == set(web_app._DECISIONS)
    page = set(re.findall(r'\["(\w+)", "[^"]+"\]', PAGE.read_text()))
    assert decisions <= page


@pytest.mark.parametrize("row", ROWS, ids=[code(row[0])[0] for row in ROWS])
def test_each_row_is_what_each_layer_says(row: list[str]) -> None:
    adapter_cell, wire_cell, resolved_cell, acp_cell, web_cell, button_cell = row
    [decision] = code(adapter_cell)
    [reply] = code(wire_cell)
    assert permission_reply_for(decision) == reply
    [resolved] = code(resolved_cell)
    assert DECISION_FOR_REPLY[reply] == resolved
    option_id, kind = code(acp_cell)
    [name] = quoted(acp_cell)
    [option] = [o for o in PERMISSION_OPTIONS if o.option_id == option_id]
    assert (option.option_id, option.kind, option.name) == (decision, kind, name)
    [body] = code(web_cell)
    assert json.loads(body) == {"decision": decision}
    [label] = quoted(button_cell)
    assert f'["{decision}", "{label}"]' in PAGE.read_text()
