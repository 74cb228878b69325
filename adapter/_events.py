"""Canonical events: what the adapter tells its host.

OpenCode's native events are translated into one provider-neutral stream.
Every event has ``type``, ``thread_id``, ``turn_id`` (inside a turn),
``event_id``, ``created_at`` and ``raw`` (the native event it came from, or
``None`` when the adapter produced it itself). Type-specific fields live on
the subclasses, so a host can ``match`` on the class or compare ``type``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ._partial import PartialResult

__all__ = [
    "ChildStarted",
    "ContentDelta",
    "Event",
    "ItemEvent",
    "ItemType",
    "RequestEvent",
    "RuntimeEvent",
    "SessionEvent",
    "ThreadMetadataUpdated",
    "TurnEvent",
]

ItemType = Literal["command", "file_change", "web", "mcp", "subagent", "other"]

_ids = itertools.count(1)


def _next_event_id() -> str:
    return f"ev_{next(_ids):08d}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    type: str
    thread_id: str
    turn_id: str | None = None
    event_id: str = field(default_factory=_next_event_id)
    created_at: float = field(default_factory=time.time)
    raw: Mapping[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEvent(Event):
    """``session.started``, ``thread.started``, ``session.exited``."""

    session_id: str
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadMetadataUpdated(Event):
    """``thread.metadata.updated``: the server named the thread."""

    title: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEvent(Event):
    """``turn.started``; ``turn.completed`` (``state``, ``error``); ``turn.aborted``.

    ``turn.aborted`` carries ``reason`` and, for an interrupt, ``partial``.
    """

    state: Literal["completed", "failed"] | None = None
    error: str | None = None
    reason: str | None = None
    partial: PartialResult | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentDelta(Event):
    """``content.delta``: new text of the root session's answer or reasoning."""

    stream: Literal["assistant_text", "reasoning_text"]
    delta: str
    item_id: str
    session_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemEvent(Event):
    """``item.started`` / ``item.updated`` / ``item.completed``.

    One tool call, in any session of the tree (``session_id`` says which).
    """

    item_id: str
    item_type: ItemType
    tool: str
    status: str
    title: str | None
    detail: str | None
    session_id: str
    input: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildStarted(Event):
    """``child.started``: a subagent (or an API-created child) joined the thread's tree."""

    session_id: str
    parent_id: str
    title: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestEvent(Event):
    """Permission (``request.opened`` / ``request.resolved``) and question
    (``user-input.requested`` / ``user-input.resolved``) requests of any session of the tree."""

    request_id: str
    session_id: str
    decision: str | None = None
    permission: str | None = None
    patterns: tuple[str, ...] = ()
    questions: tuple[Mapping[str, Any], ...] = ()
    answers: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeEvent(Event):
    """``runtime.warning`` / ``runtime.error``."""

    message: str
    error_name: str | None = None
