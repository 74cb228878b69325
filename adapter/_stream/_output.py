"""A turn's output: parts of the thread's tree become ``content.delta`` and ``item.*``.

Why its own module: output reaches the adapter two ways, live from the event
stream (:mod:`adapter._stream._translator`) and from stored messages after an outage
(:mod:`adapter._turns._running` replays what the stream did not deliver). Both go
through this one translation, below both of them, so nothing is emitted twice
and :mod:`adapter._turns._running` never calls back up into the translator. Which turn
a piece of output belongs to is decided by the thread's
:class:`~adapter._turns._message_turns.MessageLedger`, the rule the collector uses too.

Nothing here awaits: the state read and written for one part is consistent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._client._native import NativeEvent, PartDelta, PartUpdated
from .._client._responses import Message, Part
from .._logging import get_logger
from .._requests._pending import Requests
from .._threads._registry import ThreadRegistry
from .._threads._session_owners import Ownership
from .._threads._thread_state import ThreadState
from .._turns._lifecycle import Turn
from .._types._events import ContentDelta, ItemCompleted, ItemStarted, ItemUpdated
from ._seen_text import SeenText
from ._vocabulary import item_type_for_tool

__all__ = ["Output"]

_log = get_logger("adapter.translate")


class Output:
    """The translation of a thread's output parts, live or stored."""

    def __init__(self, core: ThreadRegistry, ownership: Ownership, requests: Requests) -> None:
        self._registry = core
        self._ownership = ownership
        self._requests = requests

    def _turn_of_output(self, thread: ThreadState, session_id: str, message_id: str) -> Turn | None:
        """The active turn if this output is its own; ``None`` means suppress."""
        turn = thread.turn
        if turn is None:
            return None
        if session_id != thread.session_id:
            return turn if thread.tree.sessions.get(session_id) == turn.turn_id else None
        entry = thread.ledger.get(message_id)
        if entry is None:
            # An adopted turn's answer written before the adapter saw it: its events
            # may come before the read-back places it (a message id sorts by time).
            start = turn.first_prompt_id
            adopted = turn.adopted and start is not None and message_id > start
            return turn if adopted else None
        if entry.role != "assistant" or entry.late or entry.summary:
            return None
        return turn if entry.turn_id == turn.turn_id else None

    def part(self, thread: ThreadState, part: Part, event: PartUpdated | None) -> None:
        sid = part.session_id
        if sid == thread.session_id:
            if part.type == "compaction":
                thread.compactions.requested(part.message_id, auto=part.raw.get("auto") is True)
            elif part.type == "text" and part.text is not None:
                thread.compactions.summary_text(part.message_id, part.id, part.text)
        if part.type == "tool" and part.tool == "task" and part.state is not None:
            # The call names its child first, so that the child's task.started carries it.
            child = thread.subagents.call_seen(part)
            if child is not None:
                self._ownership.adopt(thread, child, sid, raw=event)
                thread.subagents.call_ended(part, child)
        if (
            thread.requests.pending
            and thread.interrupts.stop
            is None  # our stop withdraws (and rejects) its requests itself
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
            if seen is None and turn.adopted and self._joined(turn, part, event):
                return
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

    def delta(self, thread: ThreadState, event: PartDelta) -> None:
        if event.session_id != thread.session_id or event.field != "text" or not event.delta:
            return
        turn = self._turn_of_output(thread, event.session_id, event.message_id)
        if turn is None:
            return
        turn.touch()
        # Bounded bookkeeping, not the text so far: rebuilding that string on every
        # delta made a long answer quadratic (adapter._stream._seen_text).
        seen = turn.emitted_text.get(event.part_id)
        if seen is None and turn.adopted:
            # A part of an adopted turn that streamed before the adapter saw it: its
            # beginning is in no event received, so it is emitted whole at its end.
            turn.joined_parts.add(event.part_id)
            return
        if seen is None:
            seen = turn.emitted_text[event.part_id] = SeenText()
        seen.extend(event.delta)
        self._emit_delta(thread, turn, event.session_id, event.part_id, event.delta, event)

    @staticmethod
    def _joined(turn: Turn, part: Part, event: PartUpdated | None) -> bool:
        """Whether a text part of an adopted turn, with nothing of it emitted yet, waits
        for its end: it streamed before the adapter saw it (a delta came first, or the
        stored snapshot is of a part still streaming, which OpenCode stores only at its
        start and end). A live snapshot of a new part (its start) streams as usual."""
        ended = isinstance(part.raw.get("time"), dict) and part.raw["time"].get("end") is not None
        if part.id in turn.joined_parts:
            if not ended:
                return True
            turn.joined_parts.discard(part.id)
            return False
        if event is None and not ended:
            turn.joined_parts.add(part.id)
            return True
        return False

    def _emit_delta(
        self,
        thread: ThreadState,
        turn: Turn,
        sid: str,
        part_id: str,
        delta: str,
        event: NativeEvent | None,
    ) -> None:
        self._registry.emit(
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
                self._registry.emit(ItemStarted(**common, status="running", detail=None))
            detail = state.output if status == "completed" else state.error
            self._registry.emit(ItemCompleted(**common, status=status, detail=detail))
        elif previous is None:
            self._registry.emit(ItemStarted(**common, status=status, detail=state.error))
        else:
            self._registry.emit(ItemUpdated(**common, status=status, detail=state.error))

    def replay(self, thread: ThreadState, turn: Turn, messages: Sequence[Message]) -> None:
        """Emit what stored messages hold of the turn that was never emitted (events
        lost in an outage): the same translation, so nothing is emitted twice."""
        if thread.turn is not turn:
            return
        for message in messages:
            for part in message.parts:
                if part.session_id == thread.session_id and part.message_id == message.info.id:
                    self.part(thread, part, None)
