"""Native events to canonical events: what the host sees of a thread's tree.

Each native event is parsed once (by the pump, :mod:`adapter._native`) and
handed here. This module decides which thread it concerns (through the
session -> thread map, :mod:`adapter._ownership` for sessions not yet known),
feeds the active turn's partial-result collector, and translates: text and
reasoning of the root's answer become ``content.delta``, tool calls of any
session of the tree become ``item.*``, requests go to :mod:`adapter._requests`,
and what the root's messages and status say about the turn goes to
:mod:`adapter._turns`. Which turn a piece of output belongs to is decided by
the thread's :class:`~adapter._membership.MessageLedger`, the rule the
collector uses too.

Nothing here awaits: the state read and written for one event is consistent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._core import AdapterCore
from ._events import (
    ContentDelta,
    ItemCompleted,
    ItemStarted,
    ItemUpdated,
    RuntimeErrorEvent,
    ThreadCompacted,
    ThreadMetadataUpdated,
)
from ._ids import is_session_id
from ._logging import get_logger
from ._mapping import is_placeholder_title, item_type_for_tool
from ._models import Message, Part
from ._native import (
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
)
from ._ownership import Ownership
from ._requests import Requests
from ._seen_text import SeenText
from ._thread import ThreadState
from ._turn import Turn
from ._turns import Turns

__all__ = ["Translator"]

_log = get_logger("adapter.translate")


class Translator:
    def __init__(
        self, core: AdapterCore, ownership: Ownership, requests: Requests, turns: Turns
    ) -> None:
        self._core = core
        self._ownership = ownership
        self._requests = requests
        self._turns = turns

    def handle(self, event: NativeEvent) -> None:
        sid = event.session_id
        if sid is None:
            return  # server.connected, heartbeats, session-less errors
        thread = self._core.owner.get(sid)
        if thread is None:
            self._unowned(event)
            return
        turn = thread.turn
        if turn is not None:
            turn.collector.observe_native(event)
        root = sid == thread.session_id
        # `type(event) is`, most frequent types first: this runs for every event, and
        # each class pattern of a `match` is an isinstance call (the records are final).
        if type(event) is PartUpdated:
            self._part(thread, event.part, event)
        elif type(event) is MessageUpdated:
            if root:
                if event.summary:
                    thread.compactions.summary_message(event.message_id, event.parent_id)
                self._turns.root_message(thread, event)
            if turn is not None and (event.finish is not None or event.error is not None):
                thread.lifecycle.usage_changed(turn)  # a step finished: its tokens and cost
        elif type(event) is SessionStatusChanged:
            if root:
                self._turns.root_status(thread, event.status, event.raw)
        elif type(event) is SessionUpdated or type(event) is SessionCreated:
            if root:
                self._title(thread, event)
        elif type(event) is PartDelta:
            self._delta(thread, event)
        elif type(event) is SessionIdle:
            if root:
                self._turns.root_idle(thread)
        elif type(event) is SessionErrored:
            if root:
                self._root_error(thread, event)
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

    def _unowned(self, event: NativeEvent) -> None:
        """An event of a session no thread owns: a child being born, or a request of
        a session whose birth we missed (or its answer); anything else is a stranger's."""
        match event:
            case SessionCreated() | SessionUpdated():
                parent = event.parent_id
                owner = self._core.owner.get(parent) if parent is not None else None
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
        self._core.emit(
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

    def _title(self, thread: ThreadState, event: SessionCreated | SessionUpdated) -> None:
        title = event.title
        if title and not is_placeholder_title(title) and title != thread.title:
            thread.title = title
            self._core.emit(
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
        if thread.turn is None and name != "MessageAbortedError" and thread.stop is None:
            # An error outside any turn (a late failure, a server-side problem).
            self._core.emit(
                RuntimeErrorEvent(
                    thread_id=thread.thread_id, message=message, error_name=name, raw=event.raw
                )
            )
            return
        self._turns.root_error(thread, name, message)

    # -- output -----------------------------------------------------------------------

    def _turn_of_output(self, thread: ThreadState, session_id: str, message_id: str) -> Turn | None:
        """The active turn if this output is its own; ``None`` means suppress."""
        turn = thread.turn
        if turn is None:
            return None
        if session_id != thread.session_id:
            return turn if thread.sessions.get(session_id) == turn.turn_id else None
        entry = thread.ledger.get(message_id)
        if entry is None or entry.role != "assistant" or entry.late or entry.summary:
            return None
        return turn if entry.turn_id == turn.turn_id else None

    def _part(self, thread: ThreadState, part: Part, event: PartUpdated | None) -> None:
        sid = part.session_id
        if sid == thread.session_id:
            if part.type == "compaction":
                thread.compactions.requested(part.message_id, auto=part.raw.get("auto") is True)
            elif part.type == "text" and part.text is not None:
                thread.compactions.summary_text(part.message_id, part.id, part.text)
        if part.type == "tool" and part.tool == "task" and part.state is not None:
            child = part.state.metadata.get("sessionId")
            if isinstance(child, str) and is_session_id(child):
                self._ownership.adopt(thread, child, sid, raw=event)
        if (
            thread.pending
            and thread.stop is None  # our stop withdraws (and rejects) its requests itself
            and not thread.closing
            and part.type == "tool"
            and part.call_id is not None
            and part.state is not None
            and part.state.status in ("completed", "error")
        ):
            self._requests.tool_ended(thread, sid, part.call_id)
        turn = self._turn_of_output(thread, sid, part.message_id)
        if turn is None:
            return
        turn.touch()
        if part.type in ("text", "reasoning") and sid == thread.session_id:
            text = part.text
            if text is None or part.raw.get("ignored") is True:
                return
            turn.part_streams[part.id] = (
                "assistant_text" if part.type == "text" else "reasoning_text"
            )
            seen = turn.emitted_text.get(part.id)
            if seen is None:
                seen = turn.emitted_text[part.id] = SeenText()
            new = seen.new_in(text)
            if new:
                seen.extend(new)
                self._emit_delta(thread, turn, sid, part.id, new, event)
            elif new is None:
                _log.debug("adapter.snapshot_diverged", part_id=part.id)
        elif part.type == "tool":
            self._tool(thread, turn, part, event)

    def _delta(self, thread: ThreadState, event: PartDelta) -> None:
        if event.session_id != thread.session_id or event.field != "text" or not event.delta:
            return
        turn = self._turn_of_output(thread, event.session_id, event.message_id)
        if turn is None:
            return
        turn.touch()
        # Bounded bookkeeping, not the text so far: rebuilding that string on every
        # delta made a long answer quadratic (adapter._seen_text).
        seen = turn.emitted_text.get(event.part_id)
        if seen is None:
            seen = turn.emitted_text[event.part_id] = SeenText()
        seen.extend(event.delta)
        self._emit_delta(thread, turn, event.session_id, event.part_id, event.delta, event)

    def _emit_delta(
        self,
        thread: ThreadState,
        turn: Turn,
        sid: str,
        part_id: str,
        delta: str,
        event: NativeEvent | None,
    ) -> None:
        self._core.emit(
            ContentDelta(
                thread_id=thread.thread_id,
                turn_id=turn.turn_id,
                stream=turn.part_streams.get(part_id, "assistant_text"),
                delta=delta,
                item_id=part_id,
                session_id=sid,
                raw=event.raw if event is not None else None,
            )
        )

    def _tool(self, thread: ThreadState, turn: Turn, part: Part, event: PartUpdated | None) -> None:
        state, tool = part.state, part.tool
        if state is None or tool is None:
            return
        item_id = part.call_id or part.id
        status = state.status
        previous = turn.item_status.get(item_id)
        if previous in ("completed", "error") or previous == status:
            return
        turn.item_status[item_id] = status
        common: dict[str, Any] = {
            "thread_id": thread.thread_id,
            "turn_id": turn.turn_id,
            "item_id": item_id,
            "item_type": item_type_for_tool(tool),
            "tool": tool,
            "title": state.title,
            "session_id": part.session_id,
            "input": state.input,
            "raw": event.raw if event is not None else None,
        }
        if status in ("completed", "error"):
            if previous is None:
                self._core.emit(ItemStarted(**common, status="running", detail=None))
            detail = state.output if status == "completed" else state.error
            self._core.emit(ItemCompleted(**common, status=status, detail=detail))
        elif previous is None:
            self._core.emit(ItemStarted(**common, status=status, detail=state.error))
        else:
            self._core.emit(ItemUpdated(**common, status=status, detail=state.error))

    # -- output the stream did not deliver ---------------------------------------------------

    def replay(self, thread: ThreadState, turn: Turn, messages: Sequence[Message]) -> None:
        """Emit what stored messages hold of the turn that was never emitted (events
        lost in an outage): the same translation, so nothing is emitted twice."""
        if thread.turn is not turn:
            return
        for message in messages:
            for part in message.parts:
                if part.session_id == thread.session_id and part.message_id == message.info.id:
                    self._part(thread, part, None)
