"""Canonical events: what the adapter tells its host.

OpenCode's native events are translated into one provider-neutral stream.
Every event has ``type``, ``thread_id``, ``turn_id`` (inside a turn),
``event_id``, ``created_at`` and ``raw`` (the native event it came from, or
``None`` when the adapter produced it itself).

Each event type is one class whose ``type`` is a ``Literal`` (``TurnStarted``
is always ``"turn.started"``), and :data:`AnyEvent` is the union of them all,
so a host can ``match`` exhaustively and a type checker catches a misspelt
type. The grouping classes (``TurnEvent``, ``ItemEvent``, ``RequestEvent``...)
stay as the common bases of their leaves: ``isinstance(event, TurnEvent)``
keeps working, and the ``type`` strings are those of earlier releases.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from .._base._jsonable import jsonable

# Imported at run time, not under TYPE_CHECKING: ``typing.get_type_hints`` on an event
# (serialisers such as pydantic and msgspec call it) must resolve every annotation.
from ._partial_result import PartialResult
from ._stop_report import StopReport
from ._usage import SessionUsage, TurnUsage

__all__ = [
    "AnyEvent",
    "ChildStarted",
    "ContentDelta",
    "Event",
    "FileDiff",
    "ItemCompleted",
    "ItemEvent",
    "ItemStarted",
    "ItemType",
    "ItemUpdated",
    "PlanItem",
    "RequestEvent",
    "RequestOpened",
    "RequestResolved",
    "RetryStatus",
    "RuntimeErrorEvent",
    "RuntimeEvent",
    "RuntimeWarningEvent",
    "SessionEvent",
    "SessionExited",
    "SessionStarted",
    "StreamGap",
    "TaskCompleted",
    "TaskStarted",
    "TaskStatus",
    "TaskUpdated",
    "ThreadCompacted",
    "ThreadMetadataUpdated",
    "ThreadStarted",
    "TurnAborted",
    "TurnCompleted",
    "TurnDiffUpdated",
    "TurnEvent",
    "TurnPlanUpdated",
    "TurnRetrying",
    "TurnStarted",
    "TurnStopFailed",
    "TurnStopped",
    "TurnStopping",
    "TurnUsageUpdated",
    "UserInputRequested",
    "UserInputResolved",
]

ItemType = Literal["command", "file_change", "web", "mcp", "subagent", "other"]

_ids = itertools.count(1)
#: This process's mark in every event id: an id another process (another worker, the
#: process before a restart) issued is never one of this process's, so ``events(after=)``
#: with it starts with an expired ``stream.gap`` instead of replaying from the wrong event.
_PROCESS = secrets.token_hex(4)


def _next_event_id() -> str:
    return f"ev_{_PROCESS}_{next(_ids):08d}"


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    type: str
    thread_id: str
    turn_id: str | None = None
    event_id: str = field(default_factory=_next_event_id)
    created_at: float = field(default_factory=time.time)
    raw: Mapping[str, Any] | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-ready data: every field but ``raw`` (the native event it came
        from, which is OpenCode's shape, not ours); nested records (a partial result,
        usage, a stop report) as their own ``to_dict``."""
        return {
            name: jsonable(getattr(self, name))
            for name in _field_names(type(self))
            if name != "raw"
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEvent(Event):
    """``session.started``, ``thread.started``, ``session.exited``."""

    session_id: str
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadMetadataUpdated(Event):
    """``thread.metadata.updated``: the server named the thread."""

    type: Literal["thread.metadata.updated"] = "thread.metadata.updated"
    title: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadCompacted(Event):
    """``thread.compacted``: OpenCode replaced the root session's history with a summary.

    ``auto``: the server compacted because a step overflowed the model's context (the
    agent then goes on in the same turn); otherwise a client asked (``summarize``),
    and a turn it interrupted ends ``turn.aborted`` saying so. ``summary`` is the
    model's digest (never part of a turn's answer); ``turn_id`` is the turn it
    happened in, if any.
    """

    type: Literal["thread.compacted"] = "thread.compacted"
    session_id: str
    auto: bool
    summary: str
    #: ``None`` when the summary message was not seen (the stream was down).
    summary_message_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEvent(Event):
    """``turn.started``; ``turn.completed`` (``state``, ``error``); ``turn.aborted``.

    ``turn.aborted`` carries ``reason`` and, for an interrupt, ``partial``.
    ``turn.completed``, ``turn.aborted`` and ``turn.usage`` carry ``usage``: the
    tokens and cost of the turn's whole tree.
    """

    state: Literal["completed", "failed"] | None = None
    error: str | None = None
    reason: str | None = None
    partial: PartialResult | None = None
    usage: TurnUsage | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentDelta(Event):
    """``content.delta``: new text of the root session's answer or reasoning."""

    type: Literal["content.delta"] = "content.delta"
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

    type: Literal["child.started"] = "child.started"
    session_id: str
    parent_id: str
    title: str | None = None


TaskStatus = Literal["completed", "failed", "stopped"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskStarted(Event):
    """``task.started``: a subagent of the thread's tree began, a row a host shows until
    its ``task.completed``.

    ``item_id`` is the ``item_id`` of the ``task`` tool call that spawned it (the call's
    ``item.*`` events carry the same), ``None`` for a child created through the API.
    ``description`` and ``agent`` (the subagent type) are the call's; for an API child
    they are read from its title when it has the ``"<description> (@<agent> subagent)"``
    form, else ``None`` (``description`` then is its title)."""

    type: Literal["task.started"] = "task.started"
    session_id: str
    parent_session_id: str
    item_id: str | None = None
    description: str | None = None
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskUpdated(Event):
    """``task.updated``: what a running subagent is doing now. ``tool`` is the tool it
    runs (``None`` while it writes text), ``text`` the tool's title or the end of its
    latest text (at most 200 characters). At most one per subagent per 0.5 s, and only
    when it changed; a provider retry of the subagent is told at once, once per attempt,
    with ``retry`` set (``None`` on every other update)."""

    type: Literal["task.updated"] = "task.updated"
    session_id: str
    tool: str | None = None
    text: str | None = None
    retry: RetryStatus | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCompleted(Event):
    """``task.completed``: a subagent ended; exactly once for each ``task.started``, and
    before the ``turn.completed`` / ``turn.aborted`` of the turn that stopped it.

    ``status`` is ``completed`` (``result``: its answer), ``failed`` (``error``: why) or
    ``stopped`` (a Stop, ``stop_subagent``, the thread's end, or an abort by another
    client; ``result`` is what it had answered when the server says it). Texts are at
    most 4,096 characters. ``usage`` is what that subagent's own
    session spent (its children not included)."""

    type: Literal["task.completed"] = "task.completed"
    session_id: str
    status: TaskStatus
    result: str | None = None
    error: str | None = None
    usage: SessionUsage | None = None


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
    #: A request the adapter could not route to a thread (its session's ancestry
    #: could not be read): the host still learns of it and can answer it.
    request_id: str | None = None
    session_id: str | None = None


def without_raw(event: Event) -> Event:
    """A copy of ``event`` with ``raw=None`` (same ``event_id`` and every other field).

    Built slot by slot: ``dataclasses.replace`` goes through ``__init__`` and took
    5.1 µs per event against 2.8 µs for this (measured on this machine)."""
    cls = type(event)
    copy = object.__new__(cls)
    for name in _field_names(cls):
        object.__setattr__(copy, name, getattr(event, name))
    object.__setattr__(copy, "raw", None)
    return copy


# -- one class per event type ---------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStarted(SessionEvent):
    """The thread is bound to its root session and its event stream is connected."""

    type: Literal["session.started"] = "session.started"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadStarted(SessionEvent):
    """Emitted right after ``session.started`` (a thread-level alias hosts key on)."""

    type: Literal["thread.started"] = "thread.started"


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionExited(SessionEvent):
    """The thread ended (``stop_session``, adapter close, server exit); emitted once."""

    type: Literal["session.exited"] = "session.exited"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted(TurnEvent):
    """A turn began. ``origin`` says who started its run: ``"sent"``, this adapter
    (``send_turn``, ``run_command``); ``"adopted"``, anyone else (another process,
    ``opencode attach``), or a run found working when the thread was resumed: its
    output so far is read back from the server and follows (``docs/adapter.md``,
    "Adopted turns")."""

    type: Literal["turn.started"] = "turn.started"
    origin: Literal["sent", "adopted"] = "sent"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCompleted(TurnEvent):
    """The turn ran to its end: ``state`` is ``completed``, or ``failed`` with ``error``."""

    type: Literal["turn.completed"] = "turn.completed"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnAborted(TurnEvent):
    """The turn was stopped (``reason``; ``partial``: what it had produced)."""

    type: Literal["turn.aborted"] = "turn.aborted"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStopping(TurnEvent):
    """``turn.stopping``: a stop of the thread's tree began (``turn_id``: the turn it
    stops, ``None`` when no turn was active). Every tab and every subscriber learns it,
    not only the caller of ``interrupt_turn``; it is followed by ``turn.aborted`` (the
    stop worked) or ``turn.stop_failed``."""

    type: Literal["turn.stopping"] = "turn.stopping"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStopped(TurnEvent):
    """``turn.stopped``: the stop that ``turn.stopping`` announced stopped the whole tree.

    It comes after the stopped turn's ``turn.aborted`` (none when no turn was active) and
    carries the walk's report, ``stop``: every session, its outcome and timing. So every
    tab, not only the one whose click made the call, can show how the Stop went."""

    type: Literal["turn.stopped"] = "turn.stopped"
    stop: StopReport | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStopFailed(TurnEvent):
    """``turn.stop_failed``: the stop could not stop the whole tree; the turn runs on.

    ``error`` is the first failure's message and ``error_type`` its exception's name;
    ``first_failure`` the session it happened in (``None`` when the walk itself ran out
    of time); ``stop`` the walk's report (``None`` if the stop failed before walking);
    ``partial`` what the turn had produced, as the events showed it (the
    :class:`~adapter.TreeStopError`'s ``partial``; ``None`` for another failure).
    """

    type: Literal["turn.stop_failed"] = "turn.stop_failed"
    error: str
    error_type: str
    first_failure: str | None = None
    stop: StopReport | None = None


@dataclass(frozen=True, slots=True)
class RetryStatus:
    """OpenCode is retrying a failed model request: ``attempt`` (1-based), the
    provider's ``message``, and ``next_at`` (epoch seconds of the next try)."""

    attempt: int
    message: str
    next_at: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRetrying(TurnEvent):
    """``turn.retrying``: the model provider failed and OpenCode will try again.

    OpenCode retries a 5xx/429 five times over about 70 s; without this event a
    host shows a silent spinner for that minute. The thread's
    ``SessionInfo.retry`` holds the same record until the run goes on.
    """

    type: Literal["turn.retrying"] = "turn.retrying"
    retry: RetryStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnUsageUpdated(TurnEvent):
    """``turn.usage``: the running turn's tokens and cost, after a step finished in
    any session of its tree; at most one per 250 ms per turn, and the last one
    equals the ``usage`` of the turn's ``turn.completed`` / ``turn.aborted``."""

    type: Literal["turn.usage"] = "turn.usage"


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One entry of the agent's plan: ``status`` is ``pending``, ``in_progress``,
    ``completed`` or ``cancelled`` and ``priority`` ``high``, ``medium`` or ``low`` in
    OpenCode 1.18.34, passed on as the server says them."""

    content: str
    status: str
    priority: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnPlanUpdated(Event):
    """``turn.plan.updated``: the root agent wrote its todo list (OpenCode's ``todowrite``).

    ``todos`` is the whole list each time (empty when the agent cleared it), in the
    agent's order. A subagent's own list is not the turn's plan and is not sent.
    """

    type: Literal["turn.plan.updated"] = "turn.plan.updated"
    todos: tuple[PlanItem, ...]


@dataclass(frozen=True, slots=True)
class FileDiff:
    """One file a turn changed, as OpenCode's snapshot diff says it.

    ``path`` is relative to the project's worktree; ``status`` is ``added``,
    ``modified`` or ``deleted`` in OpenCode 1.18.34 (``None`` when the server sends
    none); ``patch`` is the file's unified diff, ``None`` when the server sent none or
    when it was dropped for size, which ``patch_omitted`` says (see
    ``turn.diff.updated`` in docs/adapter.md for the bounds).
    """

    path: str
    status: str | None
    additions: int
    deletions: int
    patch: str | None = None
    patch_omitted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDiffUpdated(Event):
    """``turn.diff.updated``: the files the turn has changed so far, in full each time.

    Sent when they change (never for a turn that changed nothing), possibly just after
    the turn's end: OpenCode computes the turn's diff after each step and once more
    after the run's idle. ``omitted_files`` counts entries left out (over the bound,
    or malformed). ``raw`` is ``None``: the native message carries every patch whole.
    """

    type: Literal["turn.diff.updated"] = "turn.diff.updated"
    files: tuple[FileDiff, ...]
    omitted_files: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemStarted(ItemEvent):
    type: Literal["item.started"] = "item.started"


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemUpdated(ItemEvent):
    type: Literal["item.updated"] = "item.updated"


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemCompleted(ItemEvent):
    """The tool call ended: ``status`` is ``completed`` (``detail``: output) or ``error``."""

    type: Literal["item.completed"] = "item.completed"


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestOpened(RequestEvent):
    """A permission request waits for ``respond_to_request``."""

    type: Literal["request.opened"] = "request.opened"


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestResolved(RequestEvent):
    """A permission request ended: ``decision`` (``accept``/``decline``/..., or
    ``cancelled`` when a stop made it moot)."""

    type: Literal["request.resolved"] = "request.resolved"


@dataclass(frozen=True, slots=True, kw_only=True)
class UserInputRequested(RequestEvent):
    """A question request waits for ``respond_to_user_input``."""

    type: Literal["user-input.requested"] = "user-input.requested"


@dataclass(frozen=True, slots=True, kw_only=True)
class UserInputResolved(RequestEvent):
    """A question request ended: ``answered``, ``rejected`` or ``cancelled``."""

    type: Literal["user-input.resolved"] = "user-input.resolved"


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeWarningEvent(RuntimeEvent):
    """Something the host should know that did not end anything (a lost stream...)."""

    type: Literal["runtime.warning"] = "runtime.warning"


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeErrorEvent(RuntimeEvent):
    """An error of the thread (a failed turn's cause, the server's exit)."""

    type: Literal["runtime.error"] = "runtime.error"


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamGap(Event):
    """``stream.gap``: this subscription missed events; only its own consumer sees it.

    ``reason`` is ``"overflow"`` (the consumer fell more than ``max_queue`` events
    behind: the stream ends after this marker) or ``"expired"`` (``after=`` named an
    event no longer retained: what is retained follows). ``last_event_id`` is the last
    event delivered before the gap: subscribe again with ``after=last_event_id`` to
    catch up from the retained history. ``thread_id`` is the subscription's thread, or
    ``""`` for one over every thread. A gap is not part of any history and is never
    replayed.
    """

    type: Literal["stream.gap"] = "stream.gap"
    reason: Literal["overflow", "expired"]
    last_event_id: str | None
    message: str


#: Every event the adapter emits, as one union a host can ``match`` exhaustively.
AnyEvent = (
    SessionStarted
    | ThreadStarted
    | SessionExited
    | ThreadMetadataUpdated
    | ThreadCompacted
    | TurnStarted
    | TurnCompleted
    | TurnAborted
    | TurnRetrying
    | TurnUsageUpdated
    | TurnPlanUpdated
    | TurnDiffUpdated
    | TurnStopping
    | TurnStopped
    | TurnStopFailed
    | ContentDelta
    | ItemStarted
    | ItemUpdated
    | ItemCompleted
    | ChildStarted
    | TaskStarted
    | TaskUpdated
    | TaskCompleted
    | RequestOpened
    | RequestResolved
    | UserInputRequested
    | UserInputResolved
    | RuntimeWarningEvent
    | RuntimeErrorEvent
    | StreamGap
)
