"""Native events to canonical events: what the host sees of a thread's tree.

Each native event is parsed once (by the pump, :mod:`adapter._client._native`) and
handed here. This module decides which thread it concerns (through the
session -> thread map, :mod:`adapter._threads._session_owners` for sessions not yet known),
feeds the active turn's partial-result collector, and translates: output parts
(text, reasoning, tool calls) go to :mod:`adapter._stream._output`, the root's todo
list becomes ``turn.plan.updated`` here, a prompt's diff summary ``turn.diff.updated``
(:mod:`adapter._stream._turn_diff`), requests to
:mod:`adapter._requests._pending`, and what the root's messages and status say about the
turn to :mod:`adapter._turns._running`. It is the top of the translation: every module it
calls returns to it, none calls back into it.

Nothing here awaits: the state read and written for one event is consistent.
"""

from __future__ import annotations

from .._client._native import (
    MessageUpdated,
    NativeEvent,
    PartDelta,
    PartUpdated,
    PermissionAsked,
    PermissionReplied,
    QuestionAsked,
    QuestionRejected,
    QuestionReplied,
    SessionCompacted,
    SessionCreated,
    SessionErrored,
    SessionIdle,
    SessionStatusChanged,
    SessionUpdated,
    TodoUpdated,
)
from .._client._responses import Part
from .._requests._pending import Requests
from .._threads._registry import ThreadRegistry
from .._threads._session_owners import Ownership
from .._threads._thread_state import ThreadState
from .._turns._background import delivered_result, started_child
from .._turns._running import Turns
from .._types._events import (
    PlanItem,
    RuntimeErrorEvent,
    ThreadCompacted,
    ThreadMetadataUpdated,
    TurnPlanUpdated,
)
from ._output import Output
from ._turn_diff import turn_diff
from ._vocabulary import is_placeholder_title

__all__ = ["Translator"]


class Translator:
    def __init__(
        self,
        core: ThreadRegistry,
        ownership: Ownership,
        requests: Requests,
        turns: Turns,
        output: Output,
    ) -> None:
        self._registry = core
        self._ownership = ownership
        self._requests = requests
        self._turns = turns
        # Bound once: these run for most events.
        self._part = output.part
        self._delta = output.delta

    def handle(self, event: NativeEvent) -> None:
        sid = event.session_id
        if sid is None:
            return  # server.connected, heartbeats, session-less errors
        thread = self._registry.owner.get(sid)
        if thread is None:
            self._unowned(event)
            return
        turn = thread.turn
        if turn is not None:
            turn.collector.observe_native(event)
        root = sid == thread.session_id
        if not root:
            thread.subagents.observe(event)
        # `type(event) is`, most frequent types first: this runs for every event, and
        # each class pattern of a `match` is an isinstance call (the records are final).
        if type(event) is PartUpdated:
            part = event.part
            self._part(thread, part, event)
            if turn is not None and (part.tool == "task" or part.type == "text"):
                self._background(thread, part)
        elif type(event) is MessageUpdated:
            if root:
                if event.summary:
                    thread.compactions.summary_message(event.message_id, event.parent_id)
                self._turns.root_message(thread, event)
                if event.role == "user":
                    turn_diff(self._registry, thread, event)
            if turn is not None and (event.finish is not None or event.error is not None):
                thread.lifecycle.usage_changed(turn)  # a step finished: its tokens and cost
        elif type(event) is SessionStatusChanged:
            if root:
                self._turns.root_status(thread, event.status, event.raw)
            elif event.status.type == "idle" and turn is not None:
                self._turns.child_idle(thread, sid)
        elif type(event) is SessionUpdated or type(event) is SessionCreated:
            if root:
                self._title(thread, event)
        elif type(event) is PartDelta:
            self._delta(thread, event)
        elif type(event) is SessionIdle:
            if root:
                self._turns.root_idle(thread)
            elif turn is not None:
                self._turns.child_idle(thread, sid)
        elif type(event) is SessionErrored:
            if root:
                self._root_error(thread, event)
            elif event.error is not None and event.error.name == "MessageAbortedError":
                self._turns.child_aborted(thread, sid)
        elif type(event) is SessionCompacted:
            if root:
                self._compacted(thread, event)
        elif type(event) is PermissionAsked or type(event) is QuestionAsked:
            self._requests.opened(thread, event)
        elif (
            type(event) is PermissionReplied
            or type(event) is QuestionReplied
            or type(event) is QuestionRejected
        ):
            self._requests.resolved(thread, event)
        elif type(event) is TodoUpdated and root:
            # Only the root's list: a subagent's is its own work, not the turn's plan.
            self._plan(thread, event)

    def _background(self, thread: ThreadState, part: Part) -> None:
        """Background subagents (:mod:`adapter._turns._background`): a ``task`` call that
        started one, and the synthetic message that hands its result to its parent."""
        if part.tool == "task":
            child = started_child(part)
            if child is not None:
                self._turns.background_started(thread, part.session_id, child)
        else:
            result = delivered_result(part)
            if result is not None:
                self._turns.result_delivered(thread, result[0])

    def _unowned(self, event: NativeEvent) -> None:
        """An event of a session no thread owns: a child being born, or a request of
        a session whose birth we missed (or its answer); anything else is a stranger's."""
        match event:
            case SessionCreated() | SessionUpdated():
                parent = event.parent_id
                owner = self._registry.owner.get(parent) if parent is not None else None
                if owner is not None:
                    self._ownership.adopt(
                        owner, event.session_id, parent, title=event.title, raw=event
                    )
            case PermissionAsked() | QuestionAsked():
                self._ownership.route_request(event)
            case PermissionReplied() | QuestionReplied() | QuestionRejected():
                # Its request may be on its way to a thread (a lookup, a recovery).
                self._ownership.request_answered(event)
            case _:
                pass

    def _compacted(self, thread: ThreadState, event: SessionCompacted) -> None:
        """``session.compacted`` of the root: announced with the summary it produced."""
        if thread.closing:
            return
        compaction = thread.compactions.compacted()
        turn = thread.turn
        request = compaction.request_id if compaction is not None else None
        in_turn = turn is not None and (
            request is None or thread.ledger.turn_of(request) == turn.turn_id
        )
        self._registry.emit(
            ThreadCompacted(
                thread_id=thread.thread_id,
                turn_id=turn.turn_id if in_turn and turn is not None else None,
                session_id=thread.session_id,
                auto=compaction.auto if compaction is not None else False,
                summary=compaction.summary if compaction is not None else "",
                summary_message_id=compaction.summary_id if compaction is not None else None,
                raw=event.raw,
            )
        )

    def _plan(self, thread: ThreadState, event: TodoUpdated) -> None:
        """The root's ``todo.updated``: the whole list, as the turn's plan."""
        if thread.closing:
            return
        self._registry.emit(
            TurnPlanUpdated(
                thread_id=thread.thread_id,
                turn_id=thread.lifecycle.turn_id,
                todos=tuple(PlanItem(t.content, t.status, t.priority) for t in event.todos),
                raw=event.raw,
            )
        )

    def _title(self, thread: ThreadState, event: SessionCreated | SessionUpdated) -> None:
        title = event.title
        if title and not is_placeholder_title(title) and title != thread.title:
            thread.title = title
            self._registry.emit(
                ThreadMetadataUpdated(
                    thread_id=thread.thread_id,
                    turn_id=thread.lifecycle.turn_id,
                    title=title,
                    raw=event.raw,
                )
            )

    def _root_error(self, thread: ThreadState, event: SessionErrored) -> None:
        error = event.error
        name = error.name if error is not None else "UnknownError"
        message = (error.message if error is not None else None) or name
        if thread.turn is None and name != "MessageAbortedError" and thread.interrupts.stop is None:
            # An error outside any turn (a late failure, a server-side problem).
            self._registry.emit(
                RuntimeErrorEvent(
                    thread_id=thread.thread_id, message=message, error_name=name, raw=event.raw
                )
            )
            return
        self._turns.root_error(thread, name, message)
