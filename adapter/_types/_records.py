"""The small public records the adapter returns: a thread's info, a turn's start,
an interrupt's result, a thread's history."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._base._jsonable import jsonable

# At run time, so ``typing.get_type_hints(ThreadHistory)`` resolves ``Message``.
from .._client._responses import Message
from ._events import RetryStatus
from ._partial_result import PartialResult
from ._permissions import PermissionRule
from ._stop_report import StopReport
from ._usage import TurnUsage

__all__ = ["InterruptResult", "SessionInfo", "ThreadHistory", "ThreadStatus", "TurnStart"]

#: A thread's status: the value of its lifecycle phase (``ThreadPhase``, drawn in
#: ``docs/interrupt.md``). ``stopping``: an interrupt is under way; ``closing``:
#: ``stop_session`` (or the adapter's close) is tearing the thread down.
ThreadStatus = Literal["connecting", "ready", "running", "stopping", "closing", "stopped"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A thread bound to an OpenCode root session.

    ``resume`` is a durable cursor (the session and its thread's directory): pass it
    to ``start_session(resume=...)`` (in this process or a later one) to continue the
    same OpenCode session, or a fork of it in another directory.
    ``retry`` is set while OpenCode retries a failed model request of the
    running turn (the same record as the last ``turn.retrying`` event).
    """

    thread_id: str
    session_id: str
    status: ThreadStatus
    resume: Mapping[str, Any]
    directory: str | None
    active_turn_id: str | None = None
    last_error: str | None = None
    retry: RetryStatus | None = None
    #: The thread's permission mode: a preset name (``"ask"``, ``"auto-edit"``,
    #: ``"full-access"``), the raw rules last applied, or ``None`` (the server config).
    permissions: str | tuple[PermissionRule, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (what ``adapter.web`` answers for a thread)."""
        return {
            "thread_id": self.thread_id,
            "session_id": self.session_id,
            "status": self.status,
            "resume": jsonable(self.resume),
            "directory": self.directory,
            "active_turn_id": self.active_turn_id,
            "last_error": self.last_error,
            "retry": jsonable(self.retry),
            "permissions": jsonable(self.permissions),
        }


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

    @property
    def usage(self) -> TurnUsage:
        """Tokens and cost of the stopped turn's whole tree, read back from the server
        after the stop (the same figures as ``partial.usage`` and ``turn.aborted``)."""
        return self.partial.usage

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy: ``turn_id``, ``stop`` (the report, or ``None``), ``partial``."""
        return {
            "turn_id": self.turn_id,
            "stop": None if self.stop is None else self.stop.to_dict(),
            "partial": self.partial.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class ThreadHistory:
    thread_id: str
    session_id: str
    messages: tuple[Message, ...]
