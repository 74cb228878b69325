"""The model and agent a thread, turn or command names, checked against the inventory.

The page offers what ``GET /inventory`` lists, but any client may send anything: a model
or agent the server does not offer is refused here with a 422 naming the field, before
anything reaches OpenCode (which would otherwise take the prompt and fail it, or run it
some other way). A ``subagent``-only agent is refused too: it runs as a ``task`` child,
not as the agent of a thread's turns. When the server's list could not be read, a choice
cannot be checked and is refused with 502 rather than sent unchecked.
"""

from __future__ import annotations

from typing import Any

import adapter

from ._body import model_value, optional_str
from ._errors import ApiError, invalid

__all__ = ["checked_choices"]


async def checked_choices(
    oc: adapter.OpenCodeAdapter, body: dict[str, Any]
) -> tuple[str | None, str | None]:
    """The body's ``model`` and ``agent`` (each may be absent), both offered by the server."""
    model = model_value(body)
    agent = optional_str(body, "agent")
    if model is None and agent is None:
        return None, None
    inventory = await oc.inventory()
    if model is not None:
        _unreadable(inventory, "models", "model")
        offered = [m.id for m in inventory.models]
        if model not in offered:
            raise invalid("model", f"model {model!r:.80} is not offered: {_listed(offered)}")
    if agent is not None:
        _unreadable(inventory, "agents", "agent")
        primary = [a.name for a in inventory.agents if a.mode != "subagent"]
        if agent not in primary:
            what = "a subagent" if any(a.name == agent for a in inventory.agents) else "not offered"
            raise invalid("agent", f"agent {agent!r:.80} is {what}: {_listed(primary)}")
    return model, agent


def _unreadable(inventory: adapter.ServerInventory, part: str, field: str) -> None:
    error = inventory.errors.get(part)
    if error is not None:
        raise ApiError(
            502,
            "opencode_error",
            f"the server's {part} could not be read to check {field}: {error}",
        )


def _listed(names: list[str]) -> str:
    """The choices, for a message (bounded: a server may offer hundreds of models)."""
    shown = ", ".join(names[:20]) or "none"
    return f"the server offers {shown}" + (
        f" and {len(names) - 20} more" if len(names) > 20 else ""
    )
