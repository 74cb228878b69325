"""The words the differential scenarios are written in: the events of one session
(``idle("root")``, ``tool("root/0", "bash", "completed")``) and a titled session.

Why a module: :mod:`.scenarios` and the scenario groups spliced into it
(:mod:`.background_scenarios`) share them.
"""

from __future__ import annotations

from .language import Create
from .order import Before, Constraint, On


def user(alias: str) -> On:
    return On("message.updated", alias, {"info.role": "user"})


def busy(alias: str) -> On:
    return On("session.status", alias, {"status.type": "busy"})


def idle(alias: str) -> On:
    return On("session.idle", alias)


def tool(alias: str, name: str, status: str) -> On:
    return On("message.part.updated", alias, {"part.tool": name, "part.state.status": status})


def text_done(alias: str, text: str) -> On:
    return On("message.part.updated", alias, {"part.type": "text", "part.text": text})


def turn_order(alias: str) -> list[Constraint]:
    """A run of ``alias``: the prompt's echo, then busy, then idle."""
    return [Before(user(alias), busy(alias)), Before(busy(alias), idle(alias))]


def finished(alias: str, finish: str = "stop") -> On:
    return On("message.updated", alias, {"info.role": "assistant", "info.finish": finish})


def titled(
    alias: str, title: str | None = None, parent: str | None = None, ask_bash: bool = False
) -> Create:
    return Create(alias, title or f"diff {alias}", parent=parent, ask_bash=ask_bash)
