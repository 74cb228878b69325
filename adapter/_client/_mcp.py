"""Adding an MCP server to a running OpenCode server (``POST /mcp``), checked first.

Why its own module: a host adds the MCP servers its user configured (per host, not in
``opencode.json``), and a config OpenCode would take and then fail on, or silently
keep (measured on 1.18.34: an empty name, an empty ``command``, an unknown key are all
accepted), should be refused with the field named before anything is sent. The config
is checked against the server's schema (``McpLocalConfig`` / ``McpRemoteConfig`` of
1.18.34's OpenAPI) and sent as given.

Measured on 1.18.34 (``tests/real/test_mcp_real.py``): the add answers the directory's
whole status map ``{name: {status, error?}}`` once the server has tried to start the
MCP server: at once for a command that exits (``failed``, ``"MCP error -32000:
Connection closed"``) or does not exist (``failed``, ``"ENOENT: ..."``), or a
``disabled`` one; after the config's ``timeout`` (milliseconds; 30 000 when it has
none) plus about 2 s for one that never answers (``failed``, ``"Operation timed out
after 30000ms"``). So the call waits that long plus the adapter's request timeout.
An MCP server is added to the directory's instance: another directory's ``GET /mcp``
does not list it, and a later add of the same name replaces it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._exceptions import InvalidInputError

__all__ = [
    "DEFAULT_STARTUP_MS",
    "McpServerStatus",
    "checked_mcp_body",
    "mcp_deadline",
    "parse_added",
]

#: How long 1.18.34 waits for an MCP server without a ``timeout`` to start (measured).
DEFAULT_STARTUP_MS = 30_000

_COMMON = frozenset({"type", "enabled", "timeout"})
_KEYS = {
    "local": _COMMON | {"command", "cwd", "environment"},
    "remote": _COMMON | {"url", "headers", "oauth"},
}
_OAUTH_TEXT = ("clientId", "clientSecret", "scope", "redirectUri")


@dataclass(frozen=True, slots=True)
class McpServerStatus:
    """An MCP server's status as the server reports it: ``connected``, ``disabled``,
    ``failed``, ``needs_auth`` or ``needs_client_registration``; ``error`` is the
    server's text for ``failed`` (and ``needs_client_registration``), else ``None``."""

    name: str
    status: str
    error: str | None = None


def checked_mcp_body(name: object, config: object) -> dict[str, Any]:
    """The ``POST /mcp`` body ``{name, config}``, or an :class:`InvalidInputError`
    naming the first field that does not fit the server's schema."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError("name must be a non-empty string")
    if not isinstance(config, Mapping):
        raise InvalidInputError("config must be a mapping with a type 'local' or 'remote'")
    kind = config.get("type")
    if kind not in _KEYS:
        raise InvalidInputError(f"config type must be 'local' or 'remote', got {kind!r:.40}")
    unknown = sorted(str(key) for key in config if key not in _KEYS[kind])
    if unknown:
        raise InvalidInputError(f"config has keys a {kind} MCP server does not take: {unknown}")
    if kind == "local":
        _check_local(config)
    else:
        _check_remote(config)
    if "enabled" in config and not isinstance(config["enabled"], bool):
        raise InvalidInputError("config enabled must be a bool")
    if "timeout" in config:
        timeout = config["timeout"]
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
            raise InvalidInputError("config timeout must be a positive integer (milliseconds)")
    return {"name": name, "config": dict(config)}


def _check_local(config: Mapping[str, Any]) -> None:
    command = config.get("command")
    if (
        not isinstance(command, list | tuple)
        or not command
        or not all(isinstance(arg, str) for arg in command)
        or not command[0]
    ):
        raise InvalidInputError("config command must be a non-empty list of strings")
    if "cwd" in config and not isinstance(config["cwd"], str):
        raise InvalidInputError("config cwd must be a string")
    _check_strings(config, "environment")


def _check_remote(config: Mapping[str, Any]) -> None:
    url = config.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InvalidInputError("config url must be an http:// or https:// URL")
    _check_strings(config, "headers")
    if "oauth" in config:
        oauth = config["oauth"]
        if oauth is False:
            return
        if not isinstance(oauth, Mapping) or any(
            not isinstance(oauth.get(key, ""), str) for key in _OAUTH_TEXT
        ):
            raise InvalidInputError("config oauth must be false or a mapping of its settings")


def _check_strings(config: Mapping[str, Any], key: str) -> None:
    if key not in config:
        return
    value = config[key]
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidInputError(f"config {key} must map strings to strings")


def mcp_deadline(config: Mapping[str, Any], request_timeout: float) -> float:
    """How long the add may take: the server's wait for the MCP server to start (the
    config's ``timeout``, else OpenCode's default) plus the adapter's request timeout."""
    startup_ms = int(config.get("timeout", DEFAULT_STARTUP_MS))
    return startup_ms / 1000 + request_timeout


def parse_added(name: str) -> Callable[[object], McpServerStatus]:
    """The parser of the add's answer (the status map): the new server's status."""

    def parse(data: object) -> McpServerStatus:
        entry = data.get(name) if isinstance(data, Mapping) else None
        if not isinstance(entry, Mapping) or not isinstance(entry.get("status"), str):
            raise ValueError(f"the answer has no status for {name!r}")
        error = entry.get("error")
        return McpServerStatus(name, entry["status"], error if isinstance(error, str) else None)

    return parse
