"""``add_mcp_server`` on a real ``opencode serve`` (``docs/adapter.md``, "MCP servers"),
and the ``POST /mcp`` facts the adapter and the fake rest on.

Measured on 1.18.34 (2026-12-01): the answer is the directory's whole status map once
the server tried to start the MCP server; a command that exits at once is ``failed``
with ``"MCP error -32000: Connection closed"`` (about 70 ms), a missing program
``failed`` with ``"ENOENT: ..."``, ``enabled: false`` ``disabled``, and a stdio server
that answers (``tests/fixtures/tiny_mcp_server.py``) ``connected``. One that never
answers holds the request for its config's ``timeout`` (ms; 30 000 without one: 32.0 s
measured, 4.0 s with ``timeout: 2000``) and is then ``failed`` with ``"Operation timed
out after 2000ms"``. The server is added to the request directory's instance only:
another directory's ``GET /mcp`` lacks it, ``GET /config`` never shows it, and an
instance disposal (``POST /instance/dispose``, what a config change does) drops it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter import McpServerStatus, OpenCodeAdapter, RequestError, Timeouts
from adapter.testing import RealOpenCodeServer

pytestmark = pytest.mark.real

TINY = str(Path(__file__).parent.parent / "fixtures" / "tiny_mcp_server.py")


@pytest.fixture
def elsewhere(real_server: RealOpenCodeServer, unique_name: str) -> Path:
    """A directory of the test's own: what is added there is not seen by the other tests
    of the shared server (``GET /mcp`` is per directory)."""
    path = real_server.directory.parent / f"mcp-{unique_name}"
    path.mkdir()
    return path


def adapter_in(server: RealOpenCodeServer, directory: Path, **options: Any) -> OpenCodeAdapter:
    return OpenCodeAdapter(server.base_url, directory=str(directory), **options)


async def test_an_added_server_gets_its_status_in_its_directory_only(
    real_server: RealOpenCodeServer, unique_name: str, elsewhere: Path
) -> None:
    other = elsewhere / "other"
    other.mkdir()
    quits, missing = f"{unique_name}-quits", f"{unique_name}-missing"
    tiny, off = f"{unique_name}-tiny", f"{unique_name}-off"
    async with adapter_in(real_server, elsewhere) as oc:
        exited = await oc.add_mcp_server(quits, {"type": "local", "command": ["false"]})
        absent = await oc.add_mcp_server(
            missing, {"type": "local", "command": ["/nonexistent/mcp-server"]}
        )
        connected = await oc.add_mcp_server(
            tiny, {"type": "local", "command": [sys.executable, TINY]}
        )
        disabled = await oc.add_mcp_server(
            off, {"type": "local", "command": ["true"], "enabled": False}
        )
        here = dict((await oc.inventory()).mcp)
        there = dict((await oc.inventory(directory=str(other))).mcp)

    assert exited == McpServerStatus(quits, "failed", "MCP error -32000: Connection closed")
    assert absent.status == "failed" and (absent.error or "").startswith("ENOENT")
    assert connected == McpServerStatus(tiny, "connected", None)
    assert disabled == McpServerStatus(off, "disabled", None)
    assert {name: here[name] for name in (quits, missing, tiny, off)} == {
        quits: "failed",
        missing: "failed",
        tiny: "connected",
        off: "disabled",
    }
    assert not set(there) & {quits, missing, tiny, off}


def test_the_add_answers_the_map_replaces_a_name_and_lives_in_the_instance(
    opencode_http: httpx.Client, unique_name: str, elsewhere: Path
) -> None:
    # In a directory of its own: the disposal must not touch the other tests' instance.
    there = {"x-opencode-directory": str(elsewhere)}
    name = f"{unique_name}-x"

    def add(body: dict[str, object]) -> httpx.Response:
        return opencode_http.post("/mcp", json=body, headers=there)

    first = add({"name": name, "config": {"type": "local", "command": ["false"]}})
    again = add({"name": name, "config": {"type": "local", "command": ["true"], "enabled": False}})
    missing = add({"name": "y", "config": {"type": "local"}})
    no_url = add({"name": "y", "config": {"type": "remote"}})

    assert first.status_code == again.status_code == 200
    assert first.json()[name]["status"] == "failed"
    assert again.json()[name] == {"status": "disabled"}
    assert missing.status_code == 400
    assert missing.json()["data"]["message"] == 'Missing key\n  at ["config"]["command"]'
    assert no_url.json()["data"]["message"] == 'Missing key\n  at ["config"]["url"]'
    assert name not in (opencode_http.get("/config", headers=there).json().get("mcp") or {})
    assert opencode_http.post("/instance/dispose", headers=there).is_success
    assert name not in opencode_http.get("/mcp", headers=there).json()


async def test_a_server_that_never_answers_fails_after_its_timeout_and_the_call_returns(
    real_server: RealOpenCodeServer, unique_name: str, elsewhere: Path
) -> None:
    config = {"type": "local", "command": ["sleep", "1000"], "timeout": 1000}
    async with adapter_in(real_server, elsewhere) as oc:
        started = time.monotonic()
        status = await oc.add_mcp_server(unique_name, config)
        took = time.monotonic() - started
    assert status == McpServerStatus(unique_name, "failed", "Operation timed out after 1000ms")
    assert 1.0 <= took < 1.0 + oc.timeouts.request


async def test_the_adapter_gives_up_after_the_startup_timeout_plus_the_request_timeout(
    real_server: RealOpenCodeServer, unique_name: str, elsewhere: Path
) -> None:
    # A request timeout shorter than what the server adds to the MCP timeout (~2 s).
    config = {"type": "local", "command": ["sleep", "1000"], "timeout": 1000}
    short = adapter_in(real_server, elsewhere, timeouts=Timeouts(request=0.2))
    async with short:
        started = time.monotonic()
        with pytest.raises(RequestError):
            await short.add_mcp_server(unique_name, config)
        assert time.monotonic() - started < 1.0 + 0.2 + 1.0
