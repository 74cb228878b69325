"""What a server offers a host: its models, agents, slash commands, skills and MCP servers.

Why its own module: a host fills its model picker, its mode switch and its command
menu from these, and reads them in one call. The parts come from five routes
(``GET /config/providers``, ``/agent``, ``/command``, ``/skill``, ``/mcp``) plus the
version from ``/global/health``; they are read concurrently, each bounded by the
client's request timeout, and one that fails is named in ``errors`` without losing
the others. The shapes are those measured on OpenCode 1.18.34
(``tests/fixtures/inventory-1.18.34.json``); every entry is read leniently: unknown
fields are ignored, an entry that is not an object or has no name is skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any, Literal, cast

from .._exceptions import InvalidInputError, OpenCodeError
from ._mcp import McpServerStatus

__all__ = [
    "AgentInfo",
    "CommandInfo",
    "ModelCost",
    "ModelInfo",
    "ServerInventory",
    "SkillInfo",
    "known_command",
    "read_inventory",
]

AgentMode = Literal["primary", "subagent", "all"]
_AGENT_MODES: frozenset[str] = frozenset({"primary", "subagent", "all"})


@dataclass(frozen=True, slots=True)
class ModelCost:
    """A model's prices in dollars per million tokens; ``None`` where the server gives none."""

    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model a prompt may name: ``id`` is ``"provider/model"``."""

    id: str
    name: str
    context_limit: int | None
    output_limit: int | None
    input_modalities: tuple[str, ...]
    """The kinds of input the model takes (``text``, ``image``, ``pdf``, ...), as the
    server's ``capabilities.input`` marks them true."""
    cost: ModelCost


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """An agent: a ``primary`` one is a mode of the root (``build``, ``plan``), a
    ``subagent`` one runs as a ``task`` child, ``all`` is both."""

    name: str
    mode: AgentMode
    description: str | None
    hidden: bool = False
    """OpenCode's own agents that no user picks (``compaction``, ``summary``, ``title``)."""


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """A slash command (built in, from the configuration's ``command``, or a skill's)."""

    name: str
    description: str | None


@dataclass(frozen=True, slots=True)
class SkillInfo:
    name: str
    description: str | None


@dataclass(frozen=True, slots=True)
class ServerInventory:
    """What the server offers, as read by :meth:`adapter.OpenCodeAdapter.inventory`.

    A part that could not be read is empty (``version``: ``None``) and named in
    ``errors`` (part name -> message); the parts are ``models``, ``agents``,
    ``commands``, ``skills``, ``mcp`` (which fills ``mcp`` and ``mcp_errors``) and
    ``version``.
    """

    models: tuple[ModelInfo, ...] = ()
    agents: tuple[AgentInfo, ...] = ()
    commands: tuple[CommandInfo, ...] = ()
    skills: tuple[SkillInfo, ...] = ()
    mcp: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """MCP server name -> its status (measured: ``connected``, ``disabled``, ``failed``)."""
    mcp_errors: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """MCP server name -> the server's error text, for those that report one (a
    ``failed`` server's, measured: ``MCP error -32000: Connection closed``)."""
    version: str | None = None
    errors: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (tuples as lists, mappings as dicts)."""
        return {
            "models": [asdict(m) for m in self.models],
            "agents": [asdict(a) for a in self.agents],
            "commands": [asdict(c) for c in self.commands],
            "skills": [asdict(s) for s in self.skills],
            "mcp": dict(self.mcp),
            "mcp_errors": dict(self.mcp_errors),
            "version": self.version,
            "errors": dict(self.errors),
        }


def _text(entry: Mapping[str, Any], key: str) -> str | None:
    value = entry.get(key)
    return value if isinstance(value, str) else None


def _number(entry: object, key: str) -> float | None:
    value = entry.get(key) if isinstance(entry, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _count(entry: object, key: str) -> int | None:
    value = _number(entry, key)
    return int(value) if value is not None and value.is_integer() and value >= 0 else None


def _entries(data: object, what: str) -> list[Mapping[str, Any]]:
    """The named objects of a list: a top level that is not a list fails the part."""
    if not isinstance(data, list):
        raise ValueError(f"{what} is not a list")
    return [e for e in data if isinstance(e, Mapping) and isinstance(e.get("name"), str)]


def parse_models(data: object) -> tuple[ModelInfo, ...]:
    """``GET /config/providers`` -> ``{providers: [{id, models: {<id>: {...}}}], default}``."""
    providers = data.get("providers") if isinstance(data, Mapping) else None
    if not isinstance(providers, list):
        raise ValueError("providers is not a list")
    models: list[ModelInfo] = []
    for provider in providers:
        if not isinstance(provider, Mapping) or not isinstance(provider.get("id"), str):
            continue
        entries = provider.get("models")
        if not isinstance(entries, Mapping):
            continue
        for model_id, model in entries.items():
            if isinstance(model_id, str) and isinstance(model, Mapping):
                models.append(_model(provider["id"], model_id, model))
    return tuple(models)


def _model(provider_id: str, model_id: str, model: Mapping[str, Any]) -> ModelInfo:
    limit = model.get("limit")
    cost = model.get("cost")
    cache = cost.get("cache") if isinstance(cost, Mapping) else None
    capabilities = model.get("capabilities")
    inputs = capabilities.get("input") if isinstance(capabilities, Mapping) else None
    modalities = (
        tuple(k for k, on in inputs.items() if isinstance(k, str) and on is True)
        if isinstance(inputs, Mapping)
        else ()
    )
    return ModelInfo(
        id=f"{provider_id}/{model_id}",
        name=_text(model, "name") or model_id,
        context_limit=_count(limit, "context"),
        output_limit=_count(limit, "output"),
        input_modalities=modalities,
        cost=ModelCost(
            input=_number(cost, "input"),
            output=_number(cost, "output"),
            cache_read=_number(cache, "read"),
            cache_write=_number(cache, "write"),
        ),
    )


def parse_agents(data: object) -> tuple[AgentInfo, ...]:
    """``GET /agent`` -> ``[{name, mode, description?, ...}]``; an unknown mode is skipped."""
    return tuple(
        AgentInfo(
            e["name"],
            cast(AgentMode, e["mode"]),
            _text(e, "description"),
            hidden=e.get("hidden") is True,
        )
        for e in _entries(data, "agents")
        if e.get("mode") in _AGENT_MODES
    )


def parse_commands(data: object) -> tuple[CommandInfo, ...]:
    """``GET /command`` -> ``[{name, description?, template, source, ...}]``."""
    return tuple(
        CommandInfo(e["name"], _text(e, "description")) for e in _entries(data, "commands")
    )


def known_command(name: str, commands: tuple[CommandInfo, ...]) -> str:
    """``name`` (a leading ``/`` dropped) if the server offers that command; else an
    :class:`InvalidInputError` naming the commands it offers."""
    wanted = name.removeprefix("/")
    if not any(c.name == wanted for c in commands):
        offered = ", ".join(c.name for c in commands) or "none"
        raise InvalidInputError(f"unknown command {name!r:.80}; the server offers: {offered}")
    return wanted


def parse_skills(data: object) -> tuple[SkillInfo, ...]:
    """``GET /skill`` -> ``[{name, description, location, content}]``."""
    return tuple(SkillInfo(e["name"], _text(e, "description")) for e in _entries(data, "skills"))


def parse_mcp_servers(data: object) -> tuple[McpServerStatus, ...]:
    """``GET /mcp`` -> ``{<name>: {status, error?}}`` (``{}`` with none configured)."""
    if not isinstance(data, Mapping):
        raise ValueError("mcp is not an object")
    servers: list[McpServerStatus] = []
    for name, entry in data.items():
        if isinstance(name, str) and isinstance(entry, Mapping):
            status, error = entry.get("status"), entry.get("error")
            if isinstance(status, str):
                servers.append(
                    McpServerStatus(name, status, error if isinstance(error, str) else None)
                )
    return tuple(servers)


def parse_mcp(data: object) -> Mapping[str, str]:
    """``GET /mcp`` as MCP server name -> status."""
    return MappingProxyType({s.name: s.status for s in parse_mcp_servers(data)})


def _fields(part: str, value: Any) -> dict[str, Any]:
    """The :class:`ServerInventory` fields a part's read fills: the ``mcp`` part's
    servers (:func:`parse_mcp_servers`) fill ``mcp`` and ``mcp_errors``."""
    if part != "mcp":
        return {part: value}
    servers = cast(tuple[McpServerStatus, ...], value)
    return {
        "mcp": MappingProxyType({s.name: s.status for s in servers}),
        "mcp_errors": MappingProxyType({s.name: s.error for s in servers if s.error is not None}),
    }


async def read_inventory(
    reads: Mapping[str, Callable[[], Awaitable[Any]]], timeout: float
) -> ServerInventory:
    """Run every part's read at once, each bounded by ``timeout``; keep what succeeded.

    ``reads`` maps a part name (a :class:`ServerInventory` field) to its read, which
    returns the parsed part (for ``mcp``: :func:`parse_mcp_servers`'s servers). A part
    that raises an :class:`OpenCodeError` (the server's error, a bad shape, a refused
    connection) or outlives ``timeout`` is reported in ``errors``; anything else (a
    bug, a cancellation) propagates.
    """

    async def bounded(read: Callable[[], Awaitable[Any]]) -> Any:
        async with asyncio.timeout(timeout):
            return await read()

    names = list(reads)
    results = await asyncio.gather(*(bounded(reads[n]) for n in names), return_exceptions=True)
    parts: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, result in zip(names, results, strict=True):
        if isinstance(result, TimeoutError):
            errors[name] = f"timed out after {timeout:g} s"
        elif isinstance(result, OpenCodeError):
            errors[name] = str(result)
        elif isinstance(result, BaseException):
            raise result
        else:
            parts.update(_fields(name, result))
    return ServerInventory(**parts, errors=MappingProxyType(errors))
