"""Per-thread state of the adapter, and the small public records it returns."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._partial import PartialCollector, PartialResult
from ._stop_tree import StopReport

if TYPE_CHECKING:
    from ._client import OpenCodeClient
    from ._models import Message

__all__ = [
    "InterruptResult",
    "SessionInfo",
    "ThreadHistory",
    "ThreadStatus",
    "TurnStart",
]

ThreadStatus = Literal["connecting", "ready", "running", "stopped"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A thread bound to an OpenCode root session.

    ``resume`` is a durable cursor: pass it to ``start_session(resume=...)``
    (in this process or a later one) to continue the same OpenCode session.
    """

    thread_id: str
    session_id: str
    status: ThreadStatus
    resume: Mapping[str, Any]
    directory: str | None
    active_turn_id: str | None = None
    last_error: str | None = None


@dataclass(frozen=True, slots=True)
class TurnStart:
    thread_id: str
    turn_id: str


@dataclass(frozen=True, slots=True)
class InterruptResult:
    """What ``interrupt_turn`` did: the stop's report and what the turn had produced.

    ``turn_id`` is ``None`` for a stop with no active turn; ``stop`` is
    ``None`` when nothing had to be stopped (a turn id that is not active).
    """

    turn_id: str | None
    stop: StopReport | None
    partial: PartialResult


@dataclass(frozen=True, slots=True)
class ThreadHistory:
    thread_id: str
    session_id: str
    messages: tuple[Message, ...]


@dataclass(eq=False)
class Turn:
    turn_id: str
    collector: PartialCollector
    message_ids: list[str] = field(default_factory=list)
    echo_seen: bool = False
    idle_before_echo: bool = False
    emitted_text: dict[str, str] = field(default_factory=dict)
    part_streams: dict[str, Literal["assistant_text", "reasoning_text"]] = field(
        default_factory=dict
    )
    item_status: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def new(root_session_id: str, max_output_bytes: int) -> Turn:
        return Turn(
            turn_id=f"turn_{uuid.uuid4().hex[:16]}",
            collector=PartialCollector(root_session_id, max_output_bytes=max_output_bytes),
        )


@dataclass(eq=False)
class Stop:
    """One pending interrupt of a thread; every concurrent caller shares it."""

    turn_id: str | None
    future: asyncio.Future[InterruptResult]
    acknowledged: asyncio.Event = field(default_factory=asyncio.Event)
    deferred_idle: bool = False
    turn_settled: bool = False
    root_abort_failed: bool = False


@dataclass(frozen=True, slots=True)
class OpenRequest:
    kind: Literal["permission", "question"]
    request_id: str
    session_id: str
    questions: tuple[Mapping[str, Any], ...] = ()


@dataclass(eq=False)
class ThreadState:
    thread_id: str
    session_id: str
    directory: str | None
    client: OpenCodeClient
    pump_key: str | None
    model: str | None = None
    status: ThreadStatus = "connecting"
    active_turn: Turn | None = None
    stop: Stop | None = None
    submitting: asyncio.Task[None] | None = None
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closing: bool = False
    closed: asyncio.Event = field(default_factory=asyncio.Event)  # stopping: releases waiters
    finished: asyncio.Event = field(default_factory=asyncio.Event)  # stopped and announced
    started_emitted: bool = False
    exited_emitted: bool = False
    last_error: str | None = None
    title: str | None = None
    # Tree membership: every session of this thread (root included) -> the turn it was born in.
    sessions: dict[str, str | None] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)
    # Root messages: id -> (role, parentID) so output can be attributed to its turn.
    messages: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    pending: dict[str, OpenRequest] = field(default_factory=dict)
    busy_gen: int = 0
    last_interrupt: InterruptResult | None = None

    def info(self) -> SessionInfo:
        return SessionInfo(
            thread_id=self.thread_id,
            session_id=self.session_id,
            status=self.status,
            resume={"schema": 1, "session_id": self.session_id},
            directory=self.directory,
            active_turn_id=self.active_turn.turn_id if self.active_turn else None,
            last_error=self.last_error,
        )
