"""``OpenCodeAdapter.add_mcp_server``: an MCP server added to the server in one directory
over ``POST /mcp``, its config checked before anything is sent, its status returned and
then in ``inventory().mcp``, the call bounded by the server's own start-up timeout.

Measured on 1.18.34 (``tests/real/test_mcp_real.py``): the answer is the directory's
whole status map; a server added in one directory is absent from another's.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapter import (
    InvalidInputError,
    McpServerStatus,
    OpenCodeAdapter,
    RequestError,
    Timeouts,
)
from adapter._client._mcp import DEFAULT_STARTUP_MS, mcp_deadline
from adapter.testing import FakeOpenCodeServer

LOCAL: dict[str, Any] = {"type": "local", "command": ["my-mcp", "--stdio"]}
REMOTE: dict[str, Any] = {"type": "remote", "url": "https://mcp.example.com/mcp"}


def adds(fake: FakeOpenCodeServer) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.path == "/mcp")


async def test_an_added_server_answers_its_status_and_is_in_the_inventory(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    status = await oc.add_mcp_server("tools", LOCAL)

    assert status == McpServerStatus(name="tools", status="connected", error=None)
    assert dict((await oc.inventory()).mcp) == {"tools": "connected"}


async def test_the_status_is_what_the_server_says_failed_with_its_error(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    failure = {"status": "failed", "error": "MCP error -32000: Connection closed"}
    fake.inventory.mcp_outcomes["broken"] = failure
    config = {**REMOTE, "headers": {"Authorization": "Bearer x"}, "oauth": False}

    status = await oc.add_mcp_server("broken", config)
    disabled = await oc.add_mcp_server("off", {**LOCAL, "enabled": False})

    assert status == McpServerStatus("broken", "failed", "MCP error -32000: Connection closed")
    assert disabled == McpServerStatus("off", "disabled", None)
    assert dict((await oc.inventory()).mcp) == {"broken": "failed", "off": "disabled"}


async def test_a_server_is_added_in_one_directory_only(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    await oc.add_mcp_server("here", LOCAL, directory="/a")

    assert dict((await oc.inventory(directory="/a")).mcp) == {"here": "connected"}
    assert dict((await oc.inventory(directory="/b")).mcp) == {}


async def test_adding_a_name_again_replaces_it(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    await oc.add_mcp_server("tools", LOCAL)
    again = await oc.add_mcp_server("tools", {**LOCAL, "enabled": False})
    assert again.status == "disabled"
    assert dict((await oc.inventory()).mcp) == {"tools": "disabled"}


@pytest.mark.parametrize(
    ("name", "config", "field"),
    [
        ("", LOCAL, "name"),
        (None, LOCAL, "name"),
        ("x", None, "config"),
        ("x", [], "config"),
        ("x", {"command": ["a"]}, "type"),
        ("x", {"type": "stdio", "command": ["a"]}, "type"),
        ("x", {"type": "local"}, "command"),
        ("x", {"type": "local", "command": []}, "command"),
        ("x", {"type": "local", "command": "my-mcp"}, "command"),
        ("x", {"type": "local", "command": ["a", 3]}, "command"),
        ("x", {"type": "local", "command": [""]}, "command"),
        ("x", {**LOCAL, "environment": {"A": 1}}, "environment"),
        ("x", {**LOCAL, "cwd": 3}, "cwd"),
        ("x", {**LOCAL, "url": "http://x"}, "url"),
        ("x", {**LOCAL, "enabled": "yes"}, "enabled"),
        ("x", {**LOCAL, "timeout": 0}, "timeout"),
        ("x", {**LOCAL, "timeout": True}, "timeout"),
        ("x", {**LOCAL, "timeout": 1.5}, "timeout"),
        ("x", {"type": "remote"}, "url"),
        ("x", {"type": "remote", "url": "mcp.example.com"}, "url"),
        ("x", {**REMOTE, "headers": {"A": None}}, "headers"),
        ("x", {**REMOTE, "oauth": True}, "oauth"),
        ("x", {**REMOTE, "oauth": {"clientId": 3}}, "oauth"),
        ("x", {**REMOTE, "command": ["a"]}, "command"),
    ],
)
async def test_a_bad_config_is_refused_naming_the_field_and_nothing_is_sent(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, name: object, config: object, field: str
) -> None:
    with pytest.raises(InvalidInputError, match=field):
        await oc.add_mcp_server(name, config)  # type: ignore[arg-type]
    assert adds(fake) == 0


async def test_the_body_is_the_config_as_given(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    config = {
        **LOCAL,
        "environment": {"TOKEN": "t"},
        "cwd": "/srv",
        "enabled": True,
        "timeout": 5000,
    }
    await oc.add_mcp_server("tools", config)
    assert fake.inventory.added[fake.directory] == {"tools": config}


def test_the_wait_is_the_servers_start_up_timeout_plus_the_request_timeout() -> None:
    assert DEFAULT_STARTUP_MS == 30_000  # measured: 1.18.34 gives up after 30 s
    assert mcp_deadline(LOCAL, 10.0) == 40.0
    assert mcp_deadline({**LOCAL, "timeout": 2000}, 10.0) == 12.0


async def test_a_server_that_never_answers_the_add_is_a_bounded_error(
    fake: FakeOpenCodeServer,
) -> None:
    hold = fake.hold("POST", "/mcp")
    timeouts = Timeouts(request=0.05, connect=2.0)
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=timeouts) as oc:
        with pytest.raises(RequestError):
            await oc.add_mcp_server("slow", {**LOCAL, "timeout": 50})
    assert hold.requests
    hold.release()


async def test_the_fakes_refusals_are_the_measured_ones(fake: FakeOpenCodeServer) -> None:
    async with fake.client() as http:
        no_command = await http.post("/mcp", json={"name": "y", "config": {"type": "local"}})
        no_url = await http.post("/mcp", json={"name": "y", "config": {"type": "remote"}})
    assert no_command.status_code == 400
    assert no_command.json() == {
        "name": "BadRequest",
        "data": {"message": 'Missing key\n  at ["config"]["command"]', "kind": "Payload"},
    }
    assert no_url.json()["data"]["message"] == 'Missing key\n  at ["config"]["url"]'
