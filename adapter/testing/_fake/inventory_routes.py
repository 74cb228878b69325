"""The routes a host reads its inventory from: models, agents, commands, skills, MCP servers.

Why a module: the real server answers these from its configuration, and a test
changes that configuration here (:class:`FakeInventory`, the fake's ``inventory``)
rather than in the session routes. The defaults are what OpenCode 1.18.34 answered
with the offline test configuration (``tests/fixtures/inventory-1.18.34.json``); the
one model is the fake's own, its prices and input modalities the fake's settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from .http import Handler, Router
from .session_data import Settings
from .wire import JSON, invalid, js, json_response

_MODALITIES = ("text", "audio", "image", "video", "pdf")


def _default_agents() -> list[JSON]:
    """1.18.34's built-in agents, in its order (prompts and permission rules left out)."""
    described = {
        "build": "The default agent. Executes tools based on configured permissions.",
        "explore": "Fast agent specialized for exploring codebases.",
        "general": "General-purpose agent for researching complex questions and executing "
        "multi-step tasks.",
        "plan": "Plan mode. Disallows all edit tools.",
    }
    names = ("build", "compaction", "explore", "general", "plan", "summary", "title")
    agents: list[JSON] = []
    for name in names:
        mode = "subagent" if name in ("explore", "general") else "primary"
        agent: JSON = {"name": name, "mode": mode}
        if name in described:
            agent["description"] = described[name]
        else:
            agent["hidden"] = True
        agents.append(agent | {"native": True, "options": {}})
    return agents


def _default_commands() -> list[JSON]:
    return [
        {
            "name": "init",
            "description": "guided AGENTS.md setup",
            "source": "command",
            "template": "Create or update `AGENTS.md` for this repository. $ARGUMENTS",
        },
        {
            "name": "review",
            "description": "review changes",
            "source": "command",
            "subtask": True,
            "template": "You are a code reviewer. $ARGUMENTS",
        },
        {
            "name": "customize-opencode",
            "description": _SKILL_DESCRIPTION,
            "source": "skill",
            "template": "# Customizing opencode",
        },
    ]


_SKILL_DESCRIPTION = "Use ONLY when the user is editing or creating opencode's own configuration."


def _default_skills() -> list[JSON]:
    return [
        {
            "name": "customize-opencode",
            "description": _SKILL_DESCRIPTION,
            "location": "<built-in>",
            "content": "# Customizing opencode",
        }
    ]


@dataclass
class FakeInventory:
    """What the fake's inventory routes answer; change it in a test.

    ``agents``, ``commands``, ``skills``: the JSON entries of ``GET /agent``,
    ``/command``, ``/skill`` (a configured command appears in ``commands`` like
    the ``command`` section of ``opencode.json`` on the real server; its
    ``template`` is what ``POST /session/{id}/command`` runs). ``mcp``:
    ``GET /mcp``'s ``{name: {status, error?}}`` for the configured servers, in every
    directory. ``added``: directory -> name -> config of the servers ``POST /mcp`` added
    there (listed after the configured ones, in that directory only, as measured on
    1.18.34). ``mcp_outcomes``: name -> the status an added server gets (the fake starts
    nothing); without one it is ``disabled`` for ``enabled: false``, else ``connected``.
    The model's limits are those of :func:`adapter.testing._real_server.opencode_config`.
    """

    model_name: str = "Fake model"
    context_limit: int = 128000
    output_limit: int = 4096
    agents: list[JSON] = field(default_factory=_default_agents)
    commands: list[JSON] = field(default_factory=_default_commands)
    skills: list[JSON] = field(default_factory=_default_skills)
    mcp: dict[str, JSON] = field(default_factory=dict)
    added: dict[str, dict[str, JSON]] = field(default_factory=dict)
    mcp_outcomes: dict[str, JSON] = field(default_factory=dict)
    added_status: dict[str, dict[str, JSON]] = field(default_factory=dict)
    """directory -> name -> the status each added server got."""

    def mcp_status(self, directory: str) -> JSON:
        """``GET /mcp`` in ``directory``: the configured servers, then those added there."""
        return {**self.mcp, **self.added_status.get(directory, {})}


class InventoryRoutes:
    """The handlers of ``GET /config/providers``, ``/agent``, ``/command``, ``/skill``,
    ``/mcp``, and ``POST /mcp``."""

    def __init__(self, router: Router, settings: Settings, inventory: FakeInventory) -> None:
        self._router = router
        self._settings = settings
        self._inventory = inventory
        table = router.table
        table.add("GET", "/config/providers", self._providers)
        table.add("GET", "/agent", self._list("agents"))
        table.add("GET", "/command", self._list("commands"))
        table.add("GET", "/skill", self._list("skills"))
        table.add("GET", "/mcp", self._mcp)
        table.add("POST", "/mcp", self._add_mcp)

    async def _providers(self, request: httpx.Request, params: tuple[str, ...]) -> httpx.Response:
        settings, inventory = self._settings, self._inventory
        cost = settings.model_cost
        model: JSON = {
            "id": settings.model_id,
            "providerID": settings.provider_id,
            "name": inventory.model_name,
            "capabilities": {
                "toolcall": True,
                "input": {m: m in settings.model_modalities for m in _MODALITIES},
                "output": {m: m == "text" for m in _MODALITIES},
            },
            "cost": {
                "input": cost.get("input", 0),
                "output": cost.get("output", 0),
                "cache": {"read": cost.get("cache_read", 0), "write": cost.get("cache_write", 0)},
            },
            "limit": {"context": inventory.context_limit, "output": inventory.output_limit},
            "status": "active",
        }
        provider: JSON = {
            "id": settings.provider_id,
            "name": settings.provider_id.capitalize(),
            "source": "config",
            "models": {settings.model_id: model},
        }
        return json_response(
            200, {"providers": [provider], "default": {settings.provider_id: settings.model_id}}
        )

    def _list(self, name: str) -> Handler:
        async def handler(request: httpx.Request, params: tuple[str, ...]) -> httpx.Response:
            return json_response(200, list(getattr(self._inventory, name)))

        return handler

    async def _mcp(self, request: httpx.Request, params: tuple[str, ...]) -> httpx.Response:
        directory = self._router.request_directory(request)
        return json_response(200, self._inventory.mcp_status(directory))

    async def _add_mcp(self, request: httpx.Request, params: tuple[str, ...]) -> httpx.Response:
        """``POST /mcp {name, config}`` (measured on 1.18.34): the directory's status map
        after the add. A missing ``name``, ``config`` or ``command``/``url`` is the
        schema's 400; nothing else is checked (the real server takes an empty name or
        command, and unknown keys, and fails on them later)."""
        body = await self._router.body(request)
        for key in ("name", "config"):
            if key not in body:
                return invalid("Missing key", key)
        name, config = body["name"], body["config"]
        if not isinstance(config, dict):
            return invalid(f"Expected object, got {js(config)}", "config")
        required = "url" if config.get("type") == "remote" else "command"
        if required not in config:
            return invalid("Missing key", "config", required)
        inventory = self._inventory
        directory = self._router.request_directory(request)
        inventory.added.setdefault(directory, {})[str(name)] = config
        status = inventory.mcp_outcomes.get(str(name))
        if status is None:
            status = {"status": "disabled" if config.get("enabled") is False else "connected"}
        inventory.added_status.setdefault(directory, {})[str(name)] = dict(status)
        return json_response(200, inventory.mcp_status(directory))
