"""What the adapter holds for one thread: its session tree, messages, open requests
and pending stop. Its phase and active turn live in its :class:`Lifecycle`.

Why the parts: each concept owns its share of a thread and is the only module
that changes it, so a reader finds every write of a field in one module:

* :class:`TreeMembership` (which sessions are the thread's):
  :mod:`adapter._threads._session_owners`;
* :class:`OpenRequests` (requests the host may answer): :mod:`adapter._requests._pending`;
* :class:`InterruptState` (the pending stop, the last result): :mod:`adapter._stop._interrupt`;
* :class:`Submission` (the prompt or command being sent, one at a time):
  :mod:`adapter._turns._running`;
* :class:`~adapter._threads._subagent_tasks.SubagentTasks` (the tree's subagents as
  tasks, held by the lifecycle, which ends them with a turn or the thread):
  :mod:`adapter._threads._subagent_tasks`, through its methods.

Everything else reads them. The start of a thread (the facade) seeds the tree
with its root.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .._base._task_owner import TaskScope
from .._turns._lifecycle import Lifecycle, Turn
from .._turns._message_turns import MessageLedger
from .._types._events import FileDiff, RequestOpened, UserInputRequested
from .._types._permissions import PermissionRule
from .._types._records import InterruptResult, SessionInfo
from .._types._stop_report import StopReport
from ._compaction import CompactionLedger
from ._resume_cursors import cursor_of
from ._subagent_tasks import SubagentTasks

if TYPE_CHECKING:
    from .._client import OpenCodeClient

__all__ = [
    "InterruptState",
    "OpenRequest",
    "OpenRequests",
    "Stop",
    "Submission",
    "ThreadState",
    "TreeMembership",
]


@dataclass(eq=False)
class Stop:
    """One pending interrupt of a thread; every concurrent caller shares it."""

    turn: Turn | None
    future: asyncio.Future[InterruptResult]
    acknowledged: asyncio.Event = field(default_factory=asyncio.Event)
    root_abort_failed: bool = False

    @property
    def turn_id(self) -> str | None:
        return self.turn.turn_id if self.turn is not None else None


@dataclass(frozen=True, slots=True)
class OpenRequest:
    kind: Literal["permission", "question"]
    request_id: str
    session_id: str
    #: The event that announced it to the host (``pending_requests`` lists it again).
    announced: RequestOpened | UserInputRequested
    questions: tuple[Mapping[str, Any], ...] = ()
    #: The tool call that asked (``callID``), when the server says: once that call
    #: has ended unanswered (its run was aborted), the request is moot.
    call_id: str | None = None


@dataclass(eq=False, slots=True)
class TreeMembership:
    """The thread's session tree as adopted so far (changed by
    :mod:`adapter._threads._session_owners`)."""

    #: Every session of this thread (root included) -> the turn it was born in.
    sessions: dict[str, str | None] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)
    #: Titles of the tree's sessions, as their ``session.created`` said.
    titles: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class OpenRequests:
    """Requests of the tree still open, by id (changed by :mod:`adapter._requests._pending`)."""

    pending: dict[str, OpenRequest] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class InterruptState:
    """The stop under way, if any, and the last one's result (:mod:`adapter._stop._interrupt`)."""

    stop: Stop | None = None
    last: InterruptResult | None = None
    #: ``stop_subagent`` walks under way, by the subagent they stop (callers share one).
    subagent_stops: dict[str, asyncio.Future[StopReport]] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class Submission:
    """The prompt being sent, one at a time (changed by :mod:`adapter._turns._running`)."""

    task: asyncio.Task[Any] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: A slash command on its way (its request answers only when its run has ended):
    #: the id of its message, and set once the server has it (echoed). A cancelled
    #: command request still runs on the server (measured on 1.18.34), so a stop
    #: waits for this rather than cancel it.
    command_id: str | None = None
    landed: asyncio.Event | None = None


@dataclass(eq=False, slots=True)
class SentDiffs:
    """What ``turn.diff.updated`` last sent (changed by :mod:`adapter._stream._turn_diff`):
    the newest turn's files per prompt (user message id -> files, entries left out)."""

    turn_id: str | None = None
    prompts: dict[str, tuple[tuple[FileDiff, ...], int]] = field(default_factory=dict)


@dataclass(eq=False)
class ThreadState:
    thread_id: str
    session_id: str
    directory: str | None
    client: OpenCodeClient
    lifecycle: Lifecycle
    scope: TaskScope
    model: str | None = None
    permissions: str | tuple[PermissionRule, ...] | None = None
    title: str | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)  # closing: releases waiters
    finished: asyncio.Event = field(default_factory=asyncio.Event)  # stopped and announced
    tree: TreeMembership = field(default_factory=TreeMembership)
    ledger: MessageLedger = field(default_factory=MessageLedger)
    compactions: CompactionLedger = field(default_factory=CompactionLedger)
    requests: OpenRequests = field(default_factory=OpenRequests)
    interrupts: InterruptState = field(default_factory=InterruptState)
    submission: Submission = field(default_factory=Submission)
    diffs: SentDiffs = field(default_factory=SentDiffs)
    subagents: SubagentTasks = field(init=False)

    def __post_init__(self) -> None:
        self.subagents = self.lifecycle.tasks

    # Read-only views, for readers of one field.
    @property
    def sessions(self) -> Mapping[str, str | None]:
        return self.tree.sessions

    @property
    def parents(self) -> Mapping[str, str | None]:
        return self.tree.parents

    @property
    def pending(self) -> Mapping[str, OpenRequest]:
        return self.requests.pending

    @property
    def stop(self) -> Stop | None:
        return self.interrupts.stop

    @property
    def turn(self) -> Turn | None:
        return self.lifecycle.turn

    @property
    def closing(self) -> bool:
        return self.lifecycle.closing

    def info(self) -> SessionInfo:
        turn = self.lifecycle.turn
        return SessionInfo(
            thread_id=self.thread_id,
            session_id=self.session_id,
            status=self.lifecycle.phase.value,
            resume=cursor_of(self.session_id, self.directory),
            directory=self.directory,
            active_turn_id=turn.turn_id if turn else None,
            last_error=self.lifecycle.last_error,
            retry=turn.retry if turn else None,
            permissions=self.permissions,
        )
