"""A turn and the thread's lifecycle: the phases, a turn's record, and what moves them.

Why one module: a thread's phase, its active turn and a turn's phase change together, so
their tables, the record they describe and the code that moves them are read together.

* **The phases** (:class:`ThreadPhase`, :class:`TurnPhase`) and the moves allowed between
  them (:data:`THREAD_TRANSITIONS`, :data:`TURN_TRANSITIONS`, :data:`TURN_STARTS`). A
  thread's life (connecting, ready, running a turn, being stopped, being closed) used to
  be about twenty booleans, events and generation counters, and a turn could end in three
  places; here each is one enum, and these tables say which moves are legal. The diagrams
  in ``docs/interrupt.md`` are these tables (a test compares them).
* **One turn** (:class:`Turn`): its prompts, what the server ran for it, and what was
  emitted. A turn is everything the server runs for the prompts a host sent while it was
  active: the first prompt, steers sent during it, a follow-up that the server started as
  a second run because it arrived as the first run went idle, and the runs the server
  starts by itself (the continuation after an automatic compaction). The turn is over
  when every prompt was echoed, the newest user message of the root session (ours or the
  server's) has its answer (or the run failed), and ``/session/status`` confirms the root
  is idle.
* **The moves** (:class:`Lifecycle`): every change of a thread's phase, of its active
  turn, and of a turn's phase goes through it, which checks the move against the tables
  and emits what the move means to the host (``session.started``, ``turn.started``,
  ``turn.completed``, ``turn.aborted``, ``turn.retrying``, ``session.exited``). So a turn
  ends exactly once (a second ending is refused, not emitted), ``SessionInfo.status`` is
  the phase itself, and a turn's tasks are cancelled the moment it ends (its
  :class:`TaskScope`), instead of finding out afterwards that they are stale.

An illegal move is a bug of the adapter, not of the server: it raises
:class:`LifecycleError` (logged by the caller's guard), never a silent fix-up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from .._base._task_owner import TaskScope
from .._logging import get_logger
from .._stop._partial_collector import PartialCollector
from .._stream._seen_text import SeenText
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
from .._types._usage import TurnUsage
from ._background import BackgroundTasks
from ._usage_meter import UsageFeed

__all__ = [
    "SERVER_UNREACHABLE",
    "THREAD_TRANSITIONS",
    "TURN_STARTS",
    "TURN_TRANSITIONS",
    "Lifecycle",
    "LifecycleError",
    "ThreadPhase",
    "Turn",
    "TurnEnding",
    "TurnOrigin",
    "TurnPhase",
    "turn_id_for",
]


class ThreadPhase(StrEnum):
    """A thread's phase; its value is ``SessionInfo.status``."""

    CONNECTING = "connecting"  # bound to a session, waiting for the event stream
    READY = "ready"  # no turn running
    RUNNING = "running"  # a turn is active
    STOPPING = "stopping"  # an interrupt is stopping the tree
    CLOSING = "closing"  # stop_session / close: tearing the thread down
    STOPPED = "stopped"  # gone; session.exited was emitted (if it had started)


class TurnPhase(StrEnum):
    """Where a turn is between its first prompt and its end."""

    AWAITING_ECHO = "awaiting_echo"  # a prompt of the turn is not echoed by the server yet
    STREAMING = "streaming"  # every prompt echoed; the server is running the turn
    SETTLING = "settling"  # the root went idle; confirming with /session/status
    BACKGROUND = "background"  # the root is idle; background subagents of the turn work
    ENDED = "ended"  # completed, failed or aborted: emitted exactly once


THREAD_TRANSITIONS: Mapping[ThreadPhase, frozenset[ThreadPhase]] = {
    ThreadPhase.CONNECTING: frozenset(
        {ThreadPhase.READY, ThreadPhase.CLOSING, ThreadPhase.STOPPED}
    ),
    ThreadPhase.READY: frozenset(
        {ThreadPhase.RUNNING, ThreadPhase.STOPPING, ThreadPhase.CLOSING, ThreadPhase.STOPPED}
    ),
    ThreadPhase.RUNNING: frozenset(
        {ThreadPhase.READY, ThreadPhase.STOPPING, ThreadPhase.CLOSING, ThreadPhase.STOPPED}
    ),
    # A stop ends in READY (turn aborted), or back in RUNNING when it failed.
    ThreadPhase.STOPPING: frozenset(
        {ThreadPhase.READY, ThreadPhase.RUNNING, ThreadPhase.CLOSING, ThreadPhase.STOPPED}
    ),
    ThreadPhase.CLOSING: frozenset({ThreadPhase.STOPPED}),
    ThreadPhase.STOPPED: frozenset(),
}

#: The phase a turn begins in, by who started its run: a prompt the adapter sends waits
#: for its echo; a run it adopts (:mod:`adapter._turns._adoption`) is already under way.
TURN_STARTS: Mapping[Literal["sent", "adopted"], TurnPhase] = {
    "sent": TurnPhase.AWAITING_ECHO,
    "adopted": TurnPhase.STREAMING,
}

TURN_TRANSITIONS: Mapping[TurnPhase, frozenset[TurnPhase]] = {
    TurnPhase.AWAITING_ECHO: frozenset({TurnPhase.STREAMING, TurnPhase.ENDED}),
    TurnPhase.STREAMING: frozenset(
        {TurnPhase.AWAITING_ECHO, TurnPhase.SETTLING, TurnPhase.BACKGROUND, TurnPhase.ENDED}
    ),
    # Settling goes back to streaming when the root is busy again (a follow-up
    # the server ran as a second run), or to awaiting an echo on a new steer.
    TurnPhase.SETTLING: frozenset(
        {TurnPhase.AWAITING_ECHO, TurnPhase.STREAMING, TurnPhase.BACKGROUND, TurnPhase.ENDED}
    ),
    # Waiting on background subagents: the root runs again on a child's result (or a
    # steer), or the turn ends once none is left and nothing is owed.
    TurnPhase.BACKGROUND: frozenset(
        {TurnPhase.AWAITING_ECHO, TurnPhase.STREAMING, TurnPhase.ENDED}
    ),
    TurnPhase.ENDED: frozenset(),
}


#: Who started a turn's run: this adapter (``sent``: a prompt or command it sent), or
#: anyone else (``adopted``: another process, ``opencode attach``, a script; or a run
#: found working when the thread was resumed).
TurnOrigin = Literal["sent", "adopted"]


def turn_id_for(message_id: str) -> str:
    """The id of the turn that ``message_id`` (a user message of the root) starts.

    Derived from the message, not drawn at random, so that every process watching
    the thread names the turn alike: the message id is the server's, or the one
    this adapter minted and sent. Opaque to hosts, stable across processes."""
    return "turn_" + message_id.removeprefix("msg_")


@dataclass(eq=False)
class Turn:
    turn_id: str
    collector: PartialCollector
    scope: TaskScope
    phase: TurnPhase = TurnPhase.AWAITING_ECHO
    origin: TurnOrigin = "sent"
    #: Every prompt the host sent in this turn (minted id -> echoed by the server).
    prompts: dict[str, bool] = field(default_factory=dict)
    #: The newest user message of the root in this turn: ours, or one the server
    #: created (the synthetic "continue" after a compaction).
    last_user_id: str | None = None
    users_seen: set[str] = field(default_factory=set)
    #: User messages whose newest assistant answer has finished (completed or errored).
    answered: set[str] = field(default_factory=set)
    #: Each user message's newest assistant answer (ids sort by time): the run's answer
    #: is that one, not a step before it that finished with more steps to come.
    newest_answers: dict[str, str] = field(default_factory=dict)
    #: The run's failure (native error name, message) and the user message it ended.
    error: tuple[str, str] | None = None
    error_for: str | None = None
    aborted_elsewhere: bool = False
    #: A stop aborted the root but failed further down: the turn stays active (the
    #: host can press Stop again) and does not settle on its own.
    held: bool = False
    #: The sessions the failed stop's walk found (``GET /children`` may know children
    #: the stream never announced): a held turn ends only once none of them is busy.
    held_tree: frozenset[str] = frozenset()
    #: An idle came while a prompt's echo was still awaited, and no run began after it
    #: (no busy): it may be the idle of that prompt's own run, which overtook the echo;
    #: then no later idle comes, and the turn settles once its run has finished.
    idle_before_echo: bool = False
    #: Idles of the root seen in this turn: a status poll that answers busy while a
    #: newer idle arrived asks again (that idle found the turn already settling).
    idles: int = 0
    #: The event stream was down during this turn: what it missed is only stored, so the
    #: turn reads the stored messages before it ends (a settle after an idle may run
    #: before the reconnection's own reconcile, with every answer seen).
    missed_events: bool = False
    #: Background subagents the turn started: it stays open until they ended and the
    #: root answered their results (:mod:`adapter._turns._background`).
    background: BackgroundTasks = field(default_factory=BackgroundTasks)
    retry: RetryStatus | None = None
    started_at: float = field(default_factory=time.monotonic)
    last_activity: float = field(default_factory=time.monotonic)
    # Translation bookkeeping: what was emitted of each part, so nothing is sent twice.
    emitted_text: dict[str, SeenText] = field(default_factory=dict)
    part_streams: dict[str, Literal["assistant_text", "reasoning_text"]] = field(
        default_factory=dict
    )
    item_status: dict[str, str] = field(default_factory=dict)
    #: Text parts of an adopted turn that were streaming before the adapter saw them:
    #: what they streamed before is in no event and in no stored snapshot until the
    #: part ends, so their deltas are held back and the part's final text is emitted
    #: whole (:mod:`adapter._stream._output`).
    joined_parts: set[str] = field(default_factory=set)

    @property
    def adopted(self) -> bool:
        return self.origin == "adopted"

    @property
    def first_prompt_id(self) -> str | None:
        return next(iter(self.prompts), None)

    @property
    def all_echoed(self) -> bool:
        return all(self.prompts.values())

    @property
    def run_finished(self) -> bool:
        """Whether what the server ran for this turn has an end (idle still to confirm)."""
        last = self.last_user_id
        if last is None or not self.all_echoed:
            return False
        return last in self.answered or self.error_for == last or self.aborted_elsewhere

    def answer_seen(self, parent_id: str, message_id: str, *, finished: bool) -> None:
        """An assistant message answering ``parent_id`` was created or changed. A newer
        step that has not finished means the answer is not finished, whatever the steps
        before it did (measured on 1.18.34: a step ending ``tool-calls`` completes before
        the next one begins; a run aborted elsewhere can leave its newest step unfinished,
        with no error, and the run idle)."""
        newest = self.newest_answers.get(parent_id)
        if newest is not None and message_id < newest:
            return  # an older step's late update
        self.newest_answers[parent_id] = message_id
        if finished:
            self.answered.add(parent_id)
        else:
            self.answered.discard(parent_id)

    def touch(self) -> None:
        self.last_activity = time.monotonic()


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
