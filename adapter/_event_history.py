"""The replay window: what a subscriber that (re)connects late can still be given.

Why it exists: a page that reloads, or a browser whose stream dropped, must get
exactly what it missed, not a blank turn and not doubled text. So the hub keeps,
per thread, the events of the **current and the previous turn** (everything
since the previous turn's ``turn.started``, or since the thread started when it
has had fewer than two turns), at most ``limit`` events per thread (the oldest
go first). The histories of the ``keep_closed`` most recently closed threads
are kept too, so a page can still read how a thread ended; older ones are
forgotten. Every retained event has a sequence number in emission order, which
is how a subscription over all threads is replayed in the order it happened.

Rules:
- an event is found by its ``event_id`` only while it is retained;
- ``after(thread, event_id)`` gives the retained events emitted after it (for one
  thread, or every thread in emission order), or says it is not retained;
- memory is bounded: ``limit`` events per open thread, ``keep_closed`` closed threads;
  a retained event is kept without its ``raw`` native event (a replayed event has
  ``raw=None``; its ``event_id`` and every other field are the live event's).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Iterable

from ._events import Event, without_raw

__all__ = ["DEFAULT_HISTORY_LIMIT", "EventHistory"]

#: Events retained per thread (``OpenCodeAdapter(event_history=...)``).
DEFAULT_HISTORY_LIMIT = 5_000
#: Closed threads whose history is still retained.
KEEP_CLOSED = 16


class _ThreadHistory:
    __slots__ = ("closed", "events", "turn_starts")

    def __init__(self) -> None:
        self.events: deque[tuple[int, Event]] = deque()
        self.turn_starts: deque[int] = deque()
        self.closed = False


class EventHistory:
    def __init__(self, limit: int = DEFAULT_HISTORY_LIMIT, keep_closed: int = KEEP_CLOSED) -> None:
        self._limit = limit
        self._keep_closed = keep_closed
        self._threads: dict[str, _ThreadHistory] = {}
        self._closed: OrderedDict[str, None] = OrderedDict()
        self._where: dict[str, tuple[str, int]] = {}  # event_id -> (thread_id, seq)
        self._seq = 0

    def __len__(self) -> int:
        return len(self._where)

    def record(self, event: Event) -> None:
        self._seq += 1
        seq = self._seq
        thread_id = event.thread_id
        history = self._threads.get(thread_id)
        if history is not None and history.closed and event.type == "session.started":
            self._forget(thread_id)  # the id is bound to a new session: a new history
            history = None
        if history is None:
            history = self._threads[thread_id] = _ThreadHistory()
        if event.type == "turn.started":
            history.turn_starts.append(seq)
            if len(history.turn_starts) > 2:
                history.turn_starts.popleft()
                self._drop_before(history, history.turn_starts[0])
        if event.raw is not None:
            # The native event is OpenCode's record, often kilobytes (a part's whole state):
            # retaining it for every event of two turns cost 29 MiB per 100,000 native
            # events (benchmarks/events.py). A replayed event has ``raw=None``.
            event = without_raw(event)
        history.events.append((seq, event))
        self._where[event.event_id] = (thread_id, seq)
        while len(history.events) > self._limit:
            _, old = history.events.popleft()
            self._where.pop(old.event_id, None)
        if event.type == "session.exited":
            history.closed = True
            self._closed[thread_id] = None
            self._closed.move_to_end(thread_id)
            while len(self._closed) > self._keep_closed:
                oldest, _ = self._closed.popitem(last=False)
                self._forget(oldest)

    def after(self, thread_id: str | None, event_id: str) -> list[Event] | None:
        """The retained events after ``event_id`` (of ``thread_id``, or of every thread),
        or ``None`` when ``event_id`` is not retained (too old, or never emitted)."""
        where = self._where.get(event_id)
        if where is None or (thread_id is not None and where[0] != thread_id):
            return None
        _, seq = where
        return [event for s, event in self._retained(thread_id) if s > seq]

    def retained(self, thread_id: str | None) -> list[Event]:
        """Everything retained (of ``thread_id``, or of every thread), oldest first."""
        return [event for _, event in self._retained(thread_id)]

    def _retained(self, thread_id: str | None) -> Iterable[tuple[int, Event]]:
        if thread_id is not None:
            history = self._threads.get(thread_id)
            return () if history is None else tuple(history.events)
        return heapq.merge(*(tuple(h.events) for h in self._threads.values()))

    def _drop_before(self, history: _ThreadHistory, seq: int) -> None:
        while history.events and history.events[0][0] < seq:
            _, old = history.events.popleft()
            self._where.pop(old.event_id, None)

    def _forget(self, thread_id: str) -> None:
        history = self._threads.pop(thread_id, None)
        self._closed.pop(thread_id, None)
        if history is not None:
            for _, old in history.events:
                self._where.pop(old.event_id, None)
