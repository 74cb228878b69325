"""What an ACP session offers its client to choose, and the choices made.

Why its own module: ACP has two ways to let a user pick how the agent works, and
clients know one or the other. ``configOptions`` (selects the client shows as pickers)
carry a model select from the server's inventory, an agent select of OpenCode's
primary agents (``build``, ``plan``, ... as ``opencode acp`` offers them) and the
permission mode; ``modes`` carry the agents again for clients that only know modes.
Both stay in step: a mode set is the agent select changed, and the other way round.

A choice applies to the session's next prompts (OpenCode takes the model and the
agent per prompt); the permission mode is set on the session at once
(:meth:`~adapter.OpenCodeAdapter.set_permissions`). ``default`` (model, permission
mode) leaves the choice to the server's configuration, as before any choice; the
permission mode's ``default`` is offered until another mode is set (OpenCode appends
a session's rules: the configuration's cannot be brought back).

Only what was offered is taken: a value outside the select is ``invalid params``
and nothing reaches OpenCode.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    UnstructuredCommandInput,
)

from adapter import ServerInventory

from ._extensions import invalid

__all__ = ["AGENT", "DEFAULT", "MODEL", "PERMISSION_MODE", "Choices", "choices_from"]

MODEL = "model"
AGENT = "agent"
PERMISSION_MODE = "permission_mode"
DEFAULT = "default"
#: The adapter's permission presets (``docs/adapter.md``, "Permission modes").
_PERMISSION_MODES = (
    (DEFAULT, "As configured", "The server's configuration decides"),
    ("ask", "Ask", "Ask before edits and commands"),
    ("auto-edit", "Auto edit", "Edit without asking, ask before commands"),
    ("full-access", "Full access", "Never ask"),
)
_MAX_DESCRIPTION = 200


def _short(text: str | None) -> str | None:
    if text is None:
        return None
    line = " ".join(text.split())
    return line if len(line) <= _MAX_DESCRIPTION else line[: _MAX_DESCRIPTION - 1] + "…"


def _select(
    config_id: str,
    name: str,
    category: Literal["model", "mode"] | None,
    current: str,
    values: Iterable[tuple[str, str, str | None]],
) -> SessionConfigOptionSelect:
    """One select of ``configOptions``: ``values`` are ``(value, name, description)``.

    A ``None`` category or description is left out of the JSON, as an omitted one: the
    SDK writes its answers and notifications with ``exclude_none``."""
    return SessionConfigOptionSelect(
        id=config_id,
        name=name,
        category=category,
        type="select",  # given, not defaulted: answers are written with ``exclude_unset``
        current_value=current,
        options=[
            SessionConfigSelectOption(value=value, name=shown, description=description)
            for value, shown, description in values
        ],
    )


@dataclass(slots=True)
class Choices:
    """One session's offer (from the server's inventory) and its current choices."""

    models: dict[str, str]  # "provider/model" -> its name
    agents: dict[str, str | None]  # primary agent -> its description
    commands: dict[str, str | None]  # slash command -> its description
    model: str = DEFAULT
    agent: str | None = None
    permission_mode: str = DEFAULT
    agent_chosen: bool = False  # until then the server's default agent runs

    @property
    def prompt_model(self) -> str | None:
        """The model to name in a prompt (``None``: the server's default)."""
        return None if self.model == DEFAULT else self.model

    @property
    def prompt_agent(self) -> str | None:
        """The agent to name in a prompt: the one the client chose, else ``None`` (the
        server's ``default_agent``, which the inventory does not say; shown as ``build``)."""
        return self.agent if self.agent_chosen else None

    def config_options(self) -> list[SessionConfigOptionSelect]:
        models = [(DEFAULT, "Default (server config)", None)]
        models += [(k, v, None) for k, v in self.models.items()]
        options = [_select(MODEL, "Model", "model", self.model, models)]
        if self.agent is not None:
            agents = [(k, k, _short(d)) for k, d in self.agents.items()]
            options.append(_select(AGENT, "Agent", "mode", self.agent, agents))
        options.append(
            _select(
                PERMISSION_MODE,
                "Permission mode",
                None,
                self.permission_mode,
                self._permission_modes(),
            )
        )
        return options

    def _permission_modes(self) -> tuple[tuple[str, str, str], ...]:
        """``default`` only until a mode is set: OpenCode appends a session's rules, so the
        configuration's own cannot be brought back on a live session."""
        if self.permission_mode == DEFAULT:
            return _PERMISSION_MODES
        return _PERMISSION_MODES[1:]

    def modes(self) -> SessionModeState | None:
        if self.agent is None:
            return None
        return SessionModeState(
            current_mode_id=self.agent,
            available_modes=[
                SessionMode(id=k, name=k, description=_short(d)) for k, d in self.agents.items()
            ],
        )

    def available_commands(self) -> list[AvailableCommand]:
        return [
            AvailableCommand(
                name=name,
                description=_short(description) or name,
                input=AvailableCommandInput(UnstructuredCommandInput(hint="arguments")),
            )
            for name, description in self.commands.items()
        ]

    def check(self, config_id: str, value: object) -> str:
        """``value`` if the select ``config_id`` offers it, else ``invalid params``."""
        offered: dict[str, object] = {
            MODEL: {DEFAULT, *self.models},
            AGENT: set(self.agents),
            PERMISSION_MODE: {v for v, _, _ in self._permission_modes()},
        }
        values = offered.get(config_id)
        if values is None:
            raise invalid(f"unknown config option {config_id!r:.80}", configId=config_id)
        if not isinstance(value, str) or value not in values:  # type: ignore[operator]
            raise invalid(f"{value!r:.80} is not a value of {config_id}", configId=config_id)
        return value

    def set(self, config_id: str, value: str) -> None:
        if config_id == MODEL:
            self.model = value
        elif config_id == AGENT:
            self.agent = value
            self.agent_chosen = True
        else:
            self.permission_mode = value

    def command_of(self, text: str) -> tuple[str, str] | None:
        """``(name, arguments)`` when ``text`` is ``/name args`` of a known command."""
        if not text.startswith("/"):
            return None
        name, _, arguments = text[1:].partition(" ")
        if name not in self.commands:
            return None
        return name, arguments.strip()


def choices_from(inventory: ServerInventory) -> Choices:
    """The offer of a new session: the inventory's models, its primary agents that a user
    picks (not hidden; ``build`` first when there is one) and its commands."""
    agents = {
        a.name: a.description
        for a in inventory.agents
        if a.mode in ("primary", "all") and not a.hidden
    }
    current = "build" if "build" in agents else next(iter(agents), None)
    return Choices(
        models={m.id: m.name for m in inventory.models},
        agents=agents,
        commands={c.name: c.description for c in inventory.commands},
        agent=current,
    )
