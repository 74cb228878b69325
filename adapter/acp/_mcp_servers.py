"""The MCP servers an ACP client gives ``session/new`` (and load, resume, fork), added to
OpenCode in the session's directory.

Why its own module: ACP and OpenCode describe MCP servers differently. A stdio server
(``command``, ``args``, ``env``) is OpenCode's ``local`` (``command`` list,
``environment``); an ``http`` or ``sse`` one is OpenCode's ``remote`` (``url``,
``headers``: OpenCode's remote client speaks streamable HTTP and falls back to SSE).
ACP's ``acp`` transport (an MCP server inside the client) has no OpenCode counterpart:
it is named in a log line and skipped. A server OpenCode refuses, or that fails to start,
is logged and does not fail the session (the client still gets its session).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp.schema import HttpMcpServer, McpServerStdio, SseMcpServer

from adapter import InvalidInputError, OpenCodeAdapter, OpenCodeError
from adapter._logging import get_logger

__all__ = ["add_mcp_servers", "opencode_config"]

_log = get_logger("adapter.acp")


def opencode_config(server: object) -> dict[str, Any] | None:
    """OpenCode's ``config`` for an ACP MCP server; ``None`` for a kind it cannot take."""
    if isinstance(server, McpServerStdio):
        config: dict[str, Any] = {"type": "local", "command": [server.command, *server.args]}
        if server.env:
            config["environment"] = {e.name: e.value for e in server.env}
        return config
    if isinstance(server, HttpMcpServer | SseMcpServer):
        config = {"type": "remote", "url": server.url}
        if server.headers:
            config["headers"] = {h.name: h.value for h in server.headers}
        return config
    return None


async def add_mcp_servers(adapter: OpenCodeAdapter, servers: Sequence[Any], cwd: str) -> None:
    """Add each server OpenCode can take, one after the other, in ``cwd``."""
    for server in servers:
        name = getattr(server, "name", None)
        config = opencode_config(server)
        if config is None or not isinstance(name, str):
            kind = getattr(server, "type", type(server).__name__)
            _log.warning(
                "acp.mcp_server_skipped",
                name=name,
                kind=kind,
                reason="no such transport in OpenCode",
            )
            continue
        try:
            status = await adapter.add_mcp_server(name, config, directory=cwd)
        except (InvalidInputError, OpenCodeError) as exc:
            _log.warning("acp.mcp_server_refused", name=name[:80], error=str(exc)[:300])
            continue
        _log.info("acp.mcp_server_added", name=name, status=status.status)
