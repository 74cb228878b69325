"""The thread's lifecycle: the one place that moves a thread or a turn from phase to phase.

Every change of a thread's phase, of its active turn, and of a turn's phase
goes through :class:`Lifecycle`, which checks the move against the tables of
:mod:`adapter._turns._phases` and emits what the move means to the host
(``session.started``, ``turn.started``, ``turn.completed``, ``turn.aborted``,
``turn.retrying``, ``session.exited``). So a turn ends exactly once (a second
ending is refused, not emitted), ``SessionInfo.status`` is the phase itself,
and a turn's tasks are cancelled the moment it ends (its :class:`TaskScope`),
instead of finding out afterwards that they are stale.

An illegal move is a bug of the adapter, not of the server: it raises
:class:`LifecycleError` (logged by the caller's guard), never a silent fix-up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._logging import get_logger
from .._threads._subagent_tasks import SubagentTasks
from .._types._events import (
    Event,
    RetryStatus,
    RuntimeErrorEvent,
    SessionExited,
    SessionStarted,
    TaskStatus,
    ThreadStarted,
    TurnAborted,
    TurnCompleted,
    TurnRetrying,
    TurnStarted,
    TurnStopFailed,
    TurnStopped,
    TurnStopping,
    TurnUsageUpdated,
)
from .._types._partial_result import PartialResult
from .._types._stop_report import StopReport
from .._types._usage import TurnUsage, UsageFeed
from ._phases import THREAD_TRANSITIONS, TURN_TRANSITIONS, ThreadPhase, TurnPhase
from ._turn import Turn

__all__ = ["SERVER_UNREACHABLE", "Lifecycle", "LifecycleError", "TurnEnding"]

#: The ``error_name`` of a turn ended because the server refused every connection.
SERVER_UNREACHABLE = "ServerUnreachable"

_log = get_logger("adapter.lifecycle")


#: How a turn's ending ends the ``task`` children it still has open.
_TASK_ENDINGS: dict[str, TaskStatus] = {
    "completed": "completed",
    "failed": "failed",
    "aborted": "stopped",
}


class LifecycleError(RuntimeError):
    """A move the lifecycle tables do not allow (a bug in the adapter)."""


@dataclass(frozen=True, slots=True)
class TurnEnding:
    """How a turn ended, as the host will be told."""

    kind: Literal["completed", "failed", "aborted"]
    reason: str | None = None  # aborted: why
    error: str | None = None  # failed: the message
    error_name: str | None = None  # failed: OpenCode's error name
    partial: PartialResult | None = None  # aborted: what the turn had produced
    raw: Mapping[str, Any] | None = None


class Lifecycle:
    """The phase of one thread and of its active turn."""

    def __init__(self, thread_id: str, session_id: str, emit: Callable[[Event], None]) -> None:
        self.thread_id = thread_id
        self.session_id = session_id
        self._emit = emit
        self._phase = ThreadPhase.CONNECTING
        self._turn: Turn | None = None
        self._usage_feed: UsageFeed | None = None
        self._started = False
        self.last_error: str | None = None
        #: The id of the turn that ended last, and how.
        self.last_ended: tuple[str, TurnEnding] | None = None
        #: The subagents of the thread's tree as tasks: those still open end before the
        #: turn or the thread that ends them (``task.completed`` first).
        self.tasks = SubagentTasks(thread_id, emit)

    @property
    def phase(self) -> ThreadPhase:
        return self._phase

    @property
    def turn(self) -> Turn | None:
        """The active turn (``None`` between turns)."""
        return self._turn

    @property
    def turn_id(self) -> str | None:
        return self._turn.turn_id if self._turn is not None else None

    @property
    def closing(self) -> bool:
        return self._phase in (ThreadPhase.CLOSING, ThreadPhase.STOPPED)

    def _move(self, to: ThreadPhase) -> None:
        if to is self._phase:
            return
        if to not in THREAD_TRANSITIONS[self._phase]:
            raise LifecycleError(f"thread {self.thread_id}: {self._phase} -> {to} is not allowed")
        _log.debug("lifecycle.thread", thread_id=self.thread_id, frm=self._phase, to=to)
        self._phase = to

    def _turn_to(self, turn: Turn, to: TurnPhase) -> None:
        if to is turn.phase:
            return
        if to not in TURN_TRANSITIONS[turn.phase]:
            raise LifecycleError(f"turn {turn.turn_id}: {turn.phase} -> {to} is not allowed")
        turn.phase = to

    # -- thread ---------------------------------------------------------------

    def connected(self) -> None:
        """The event stream is up: the thread is ready and the host is told so."""
        self._move(ThreadPhase.READY)
        self._started = True
        self._emit(SessionStarted(thread_id=self.thread_id, session_id=self.session_id))
        self._emit(ThreadStarted(thread_id=self.thread_id, session_id=self.session_id))

    def begin_close(self) -> bool:
        """Start tearing the thread down; ``False`` if that had started already."""
        if self.closing:
            return False
        self._move(ThreadPhase.CLOSING)
        return True

    def closed(self, reason: str) -> None:
        """The thread is gone: its turn (if any) ends with it, ``session.exited`` once."""
        if self._phase is ThreadPhase.STOPPED:
            return
        self._move(ThreadPhase.STOPPED)
        self.tasks.thread_ended()
        turn, self._turn = self._turn, None
        if turn is not None:
            turn.phase = TurnPhase.ENDED
            turn.scope.cancel()
        if self._usage_feed is not None:
            self._usage_feed.stop()
            self._usage_feed = None
        if self._started:
            self._emit(
                SessionExited(
                    thread_id=self.thread_id,
                    turn_id=turn.turn_id if turn else None,
                    session_id=self.session_id,
                    reason=reason,
                )
            )

    # -- turns ------------------------------------------------------------------

    def begin_turn(self, turn: Turn) -> None:
        if self._turn is not None:
            raise LifecycleError(f"thread {self.thread_id} already runs {self._turn.turn_id}")
        self._move(ThreadPhase.RUNNING)
        self._turn = turn
        self.last_error = None
        self._usage_feed = UsageFeed(
            turn.collector.usage, lambda usage: self._report_usage(turn, usage)
        )
        self._emit(TurnStarted(thread_id=self.thread_id, turn_id=turn.turn_id, origin=turn.origin))

    def _report_usage(self, turn: Turn, usage: TurnUsage) -> None:
        self._emit(TurnUsageUpdated(thread_id=self.thread_id, turn_id=turn.turn_id, usage=usage))

    def usage_changed(self, turn: Turn) -> None:
        """A step of the turn's tree finished: ``turn.usage`` (throttled, see UsageFeed)."""
        if turn is self._turn and self._usage_feed is not None:
            self._usage_feed.changed()

    def advance(self, turn: Turn, to: TurnPhase) -> bool:
        """Move the active turn to a phase short of its end; ``False`` if it is not active."""
        if to is TurnPhase.ENDED:
            raise LifecycleError("a turn ends through end_turn()")
        if turn is not self._turn:
            return False
        self._turn_to(turn, to)
        return True

    def retrying(self, turn: Turn, retry: RetryStatus | None, raw: Mapping[str, Any]) -> None:
        """OpenCode retries (``retry``) or went on (``None``) after a failed model request."""
        if turn is not self._turn or retry == turn.retry:
            return
        turn.retry = retry
        if retry is not None:
            self._emit(
                TurnRetrying(thread_id=self.thread_id, turn_id=turn.turn_id, retry=retry, raw=raw)
            )

    def end_turn(self, turn: Turn, ending: TurnEnding) -> bool:
        """End the active turn once; ``False`` (nothing emitted) if it is not active."""
        if turn is not self._turn:
            return False
        self._turn_to(turn, TurnPhase.ENDED)
        turn.scope.cancel()
        self._turn = None
        self.last_ended = (turn.turn_id, ending)
        turn.retry = None
        if self._phase is ThreadPhase.RUNNING:
            self._move(ThreadPhase.READY)
        fields: dict[str, Any] = {"thread_id": self.thread_id, "turn_id": turn.turn_id}
        self.tasks.turn_ended(turn.turn_id, _TASK_ENDINGS[ending.kind])
        # The final figures (after a stop: read back from the server), reported as the
        # last turn.usage too, right before the ending.
        usage = ending.partial.usage if ending.partial is not None else turn.collector.usage()
        if self._usage_feed is not None:
            self._usage_feed.close(usage)
            self._usage_feed = None
        if ending.kind == "aborted":
            self.last_error = ending.reason
            self._emit(
                TurnAborted(
                    **fields,
                    reason=ending.reason,
                    partial=ending.partial,
                    usage=usage,
                    raw=ending.raw,
                )
            )
        elif ending.kind == "failed":
            self.last_error = ending.error
            self._emit(
                TurnCompleted(
                    **fields, state="failed", error=ending.error, usage=usage, raw=ending.raw
                )
            )
            self._emit(
                RuntimeErrorEvent(
                    **fields,
                    message=ending.error or "the turn failed",
                    error_name=ending.error_name,
                    raw=ending.raw,
                )
            )
        else:
            self._emit(TurnCompleted(**fields, state="completed", usage=usage, raw=ending.raw))
        return True

    # -- interrupts -------------------------------------------------------------

    def begin_stop(self) -> None:
        """A stop of the tree began: ``stopping``, told to every subscriber."""
        self._move(ThreadPhase.STOPPING)
        self._emit(TurnStopping(thread_id=self.thread_id, turn_id=self.turn_id))

    def stopped(self, turn_id: str | None, report: StopReport | None) -> None:
        """The stop worked: ``turn.stopped`` with the walk's report."""
        self._emit(TurnStopped(thread_id=self.thread_id, turn_id=turn_id, stop=report))

    def stop_failed(self, turn_id: str | None, error: BaseException) -> None:
        """The stop could not stop the whole tree: ``turn.stop_failed`` with the first
        failure, the walk's report (when it got that far) and what the turn had produced
        (the error's ``partial``, when it carries one)."""
        report = getattr(error, "report", None)
        first = getattr(error, "first_failure", None)
        partial = getattr(error, "partial", None)
        self._emit(
            TurnStopFailed(
                thread_id=self.thread_id,
                turn_id=turn_id,
                error=str(error) or type(error).__name__,
                error_type=type(error).__name__,
                first_failure=getattr(first, "session_id", None),
                stop=report if isinstance(report, StopReport) else None,
                partial=partial if isinstance(partial, PartialResult) else None,
            )
        )

    def stop_done(self) -> None:
        """The stop finished (its turn was ended by it): the thread is ready again."""
        if self._phase is ThreadPhase.STOPPING:
            self._move(ThreadPhase.RUNNING if self._turn is not None else ThreadPhase.READY)
