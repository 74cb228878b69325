"""``opencode-tree inventory``, against the in-process fake server: the tables, the JSON
shape, a part that could not be read, and hostile server text."""

from __future__ import annotations

import json

import pytest
from rich.cells import cell_len

from adapter import ServerInventory
from adapter.cli import amain
from adapter.testing import FakeOpenCodeServer, free_port
from tests.test_cli import StrictTerminal, url


def error_lines(term: StrictTerminal) -> list[str]:
    """The CLI's own error lines (stderr also has the retry warnings of the log)."""
    return [line for line in term.err.splitlines() if line.startswith("error:")]


PRICE = {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}


def configure(fake: FakeOpenCodeServer) -> None:
    """A priced model, a configured command and two MCP servers, one failed."""
    fake.model_cost = PRICE
    fake.model_modalities = frozenset({"text", "image"})
    fake.inventory.commands.append({"name": "hello", "description": "Greets", "template": "Hi"})
    fake.inventory.mcp["docs"] = {"status": "connected"}
    fake.inventory.mcp["broken"] = {"status": "failed", "error": "MCP error -32000: closed"}


async def test_json_is_the_inventory_with_stable_keys(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    term = StrictTerminal(monkeypatch)
    configure(fake)
    code = await amain(["inventory", "--json", *url(fake)], transport=fake.transport)
    assert (code, term.err) == (0, "")
    data = json.loads(term.out)
    assert list(data) == list(ServerInventory().to_dict()), "the keys of to_dict, in order"
    assert data["models"] == [
        {
            "id": "fake/fake-model",
            "name": "Fake model",
            "context_limit": 128000,
            "output_limit": 4096,
            "input_modalities": ["text", "image"],
            "cost": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
        }
    ]
    assert {
        "name": "plan",
        "mode": "primary",
        "description": "Plan mode. Disallows all edit tools.",
        "hidden": False,
    } in data["agents"]
    assert {"name": "hello", "description": "Greets"} in data["commands"]
    assert [s["name"] for s in data["skills"]] == ["customize-opencode"]
    assert data["mcp"] == {"docs": "connected", "broken": "failed"}
    assert data["mcp_errors"] == {"broken": "MCP error -32000: closed"}
    assert data["version"] == "1.18.34" and data["errors"] == {}


@pytest.mark.parametrize("columns", [400, 60])
async def test_tables_show_every_part_in_a_wide_and_a_narrow_terminal(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    term = StrictTerminal(monkeypatch, rich=True)
    monkeypatch.setenv("COLUMNS", str(columns))
    configure(fake)
    code = await amain(["inventory", *url(fake)], transport=fake.transport)
    assert (code, term.err) == (0, "")
    out = term.out
    assert all(cell_len(line) <= columns for line in out.splitlines())
    assert "OpenCode 1.18.34" in out
    for text in ("fake/fake-model", "128,000", "4,096", "image", "15", "3.75"):
        assert text in out, text
    for text in ("build", "primary", "general", "subagent", "Plan mode."):
        assert text in out, text
    for text in ("init", "review", "hello", "Greets", "customize-opencode"):
        assert text in out, text
    for text in ("docs", "connected", "broken", "failed", "MCP error -32000"):
        assert text in out, text


async def test_plain_output_when_not_a_terminal(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    term = StrictTerminal(monkeypatch)
    configure(fake)
    code = await amain(["inventory", *url(fake)], transport=fake.transport)
    assert (code, term.err) == (0, "")
    assert "fake/fake-model" in term.out and "MCP error -32000: closed" in term.out
    assert "\x1b" not in term.out


@pytest.mark.parametrize("mode", ["rich", "json"])
async def test_a_part_that_failed_is_named_and_the_exit_code_is_1(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    term = StrictTerminal(monkeypatch, rich=mode == "rich")
    fake.fail("GET", "/skill", status=500, times=None)
    argv = ["inventory", *url(fake), *(["--json"] if mode == "json" else [])]
    code = await amain(argv, transport=fake.transport)
    assert code == 1
    [line] = error_lines(term)
    assert line.startswith("error: skills not read: ") and "500" in line
    if mode == "json":
        data = json.loads(term.out)
        assert list(data["errors"]) == ["skills"] and data["skills"] == []
        assert data["models"][0]["context_limit"] == 128000
    else:
        assert "fake/fake-model" in term.out and "not read" in term.out


async def test_an_unreachable_server_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    term = StrictTerminal(monkeypatch)
    port = free_port()
    argv = ["inventory", "--url", f"http://127.0.0.1:{port}", "--timeout", "2"]
    code = await amain(argv)
    assert code == 1
    [line] = error_lines(term)
    assert line.startswith(f"error: could not read the inventory from http://127.0.0.1:{port}: ")
    assert "connection failed" in line
    assert term.out == ""


HOSTILE = "[/bold] [link=http://x]evil\x1b]0;owned\x07\x1b[2J\r\nnext\x00\x9b31m\u202e\ud800 end"


@pytest.mark.parametrize("mode", ["plain", "rich", "narrow", "json"])
async def test_hostile_server_text_cannot_reach_the_terminal_or_break_the_json(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    term = StrictTerminal(monkeypatch, rich=mode in ("rich", "narrow"))
    if mode == "narrow":
        monkeypatch.setenv("COLUMNS", "60")  # the models as one list each
    huge = "x" * 200_000
    fake.inventory.model_name = HOSTILE
    fake.inventory.agents.append({"name": HOSTILE, "mode": "primary", "description": huge})
    fake.inventory.commands.append({"name": "c\ud83d", "description": HOSTILE})
    fake.inventory.mcp[HOSTILE] = {"status": HOSTILE, "error": HOSTILE + huge}
    argv = ["inventory", *url(fake), *(["--json"] if mode == "json" else [])]
    code = await amain(argv, transport=fake.transport)
    assert (code, term.err) == (0, "")
    raw = term.out
    if mode == "json":
        data = json.loads(raw)
        assert "\\ud8" not in raw, "no lone surrogate escape"
        assert data["models"][0]["name"] == HOSTILE.replace("\ud800", "\ufffd")
        assert data["agents"][-1]["description"] == huge, "JSON keeps the server's data whole"
        assert "c\ufffd" in [c["name"] for c in data["commands"]]
        return
    for control in ("\x1b]", "\x1b[2J", "\x07", "\x00", "\x9b", "\r", "\u202e"):
        assert control not in raw, repr(control)
    assert "[/bold] [link=http://x]evil" in raw, "brackets are text, not rich markup"
    assert "end" in raw and "\ufffd" in raw
    assert len(raw) < 20_000, "a huge string is cut for the terminal"
