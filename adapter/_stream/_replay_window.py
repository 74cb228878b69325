"""The replay window: what a subscriber that (re)connects late can still be given.

Why it exists: a page that reloads, or a browser whose stream dropped, must get
exactly what it missed, not a blank turn and not doubled text. So the hub keeps,
per thread, the events of the **current and the previous turn** (everything
since the previous turn's ``turn.started``, or since the thread started when it
has had fewer than two turns), at most ``limit`` events and ``max_bytes`` bytes per
thread (the oldest go first). The histories of the ``keep_closed`` most recently closed threads
are kept too, so a page can still read how a thread ended; older ones are
forgotten. Every retained event has a sequence number in emission order, which
is how a subscription over all threads is replayed in the order it happened.

Rules:
- an event is found by its ``event_id`` only while it is retained;
- ``after(thread, event_id)`` gives the retained events emitted after it (for one
  thread, or every thread in emission order), or says it is not retained;
- memory is bounded: ``limit`` events and ``max_bytes`` bytes per thread, open or
  one of the ``keep_closed`` closed ones; a retained event is kept without its
  ``raw`` native event (a replayed event has ``raw=None``; its ``event_id`` and
  every other field are the live event's);
- an event's bytes are what its strings and containers take in memory
  (``sys.getsizeof``, constant time each) plus the event itself, counted once when
  it is recorded, never by serialising it. A count of events alone let 60 deltas
  of 3 MB hold 172 MiB after the thread stopped (``benchmarks/text_deltas.py``);
- an event larger than ``max_bytes`` on its own is not retained at all: asking
  ``after=`` it, or an event before it, reports the gap as ``expired``.
"""

from __future__ import annotations

import heapq
import sys
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields, is_dataclass
from operator import attrgetter
from typing import cast

from .._types._events import (
    ContentDelta,
    Event,
    ItemCompleted,
    ItemEvent,
    ItemStarted,
    ItemUpdated,
    without_raw,
)

__all__ = ["DEFAULT_HISTORY_BYTES", "DEFAULT_HISTORY_LIMIT", "EventHistory", "retained_size"]

#: Events retained per thread (``OpenCodeAdapter(event_history=...)``).
DEFAULT_HISTORY_LIMIT = 5_000
#: Bytes retained per thread (``OpenCodeAdapter(event_history_bytes=...)``).
DEFAULT_HISTORY_BYTES = 16 * 1024 * 1024
#: Closed threads whose history is still retained.
KEEP_CLOSED = 16

#: A content delta without its text: the object and its own ids and timestamp.
_DELTA_COST = (
    sys.getsizeof(
        ContentDelta(thread_id="", stream="assistant_text", delta="", item_id="", session_id="")
    )
    + 3 * sys.getsizeof("x" * 40)
    + sys.getsizeof(0.0)
)
_ITEM_KINDS = frozenset({ItemStarted, ItemUpdated, ItemCompleted})
#: An item event without title, detail and input: the object and its own ids, tool
#: name and timestamp.
_ITEM_COST = (
    sys.getsizeof(
        ItemStarted(
            thread_id="",
            item_id="",
            item_type="other",
            tool="",
            status="",
            title=None,
            detail=None,
            session_id="",
        )
    )
    + 5 * sys.getsizeof("x" * 40)
    + sys.getsizeof(0.0)
)
_LEAVES = frozenset({str, bytes, int, float, bool})
_SEQUENCES = frozenset({list, tuple, set, frozenset, deque})


def retained_size(event: Event) -> int:
    """Bytes an event takes in memory: itself, its strings and containers, recursively.

    Linear in the event's own data and without serialising it; a container is
    counted once per event, but one shared by two events (a tool's input on
    ``item.started`` and ``item.completed``) counts for both, which errs on the safe
    side. Strings and scalars are counted at each use, though the interpreter shares
    small ints and interned strings. The two most frequent kinds take a short cut
    (the estimates stay within 15 % of the full walk): a ``content.delta`` is its
    text, an item event its title, detail and input, each plus the fixed cost of the
    event, its ids and timestamp. Measured: 0.15 µs and 1.4 µs (3.3 µs walked field
    by field), about 3 % of the pump's CPU in ``benchmarks/events.py --quick``.
    """
    kind = type(event)
    if kind is ContentDelta:  # the bulk of a long answer: one string
        return _DELTA_COST + sys.getsizeof(cast(ContentDelta, event).delta)
    if kind in _ITEM_KINDS:
        item = cast(ItemEvent, event)
        return (
            _ITEM_COST
            + sys.getsizeof(item.title)
            + sys.getsizeof(item.detail)
            + _walk_size(item.input)
        )
    return _walk_size(event)


def _walk_size(root: object) -> int:
    size = sys.getsizeof
    total = 0
    stack: list[object] = [root]
    seen: set[int] = set()  # containers already counted: no cycle can loop, nothing twice
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind in _LEAVES:
            total += size(value)
            continue
        if value is None or id(value) in seen:
            continue
        seen.add(id(value))
        total += size(value)
        if kind is dict or isinstance(value, Mapping):
            mapping = cast(Mapping[object, object], value)
            stack.extend(mapping.keys())
            stack.extend(mapping.values())
        elif kind in _SEQUENCES:
            stack.extend(cast(Iterable[object], value))
        else:
            stack.extend(_fields_of(kind)(value))
    return total


_GETTERS: dict[type, Callable[[object], tuple[object, ...]]] = {}


def _no_fields(_: object) -> tuple[object, ...]:
    return ()


def _fields_of(cls: type) -> Callable[[object], tuple[object, ...]]:
    """A function giving a dataclass's field values (none for another type): built
    once per class, one C call per object (``operator.attrgetter``)."""
    getter = _GETTERS.get(cls)
    if getter is None:
        names = tuple(f.name for f in fields(cls)) if is_dataclass(cls) else ()
        if len(names) >= 2:
            getter = cast(Callable[[object], tuple[object, ...]], attrgetter(*names))
        elif names:
            only = attrgetter(names[0])

            def getter(value: object) -> tuple[object, ...]:
                return (only(value),)

        else:
            getter = _no_fields
        _GETTERS[cls] = getter
    return getter


class _ThreadHistory:
    __slots__ = ("bytes", "closed", "events", "turn_starts")

    def __init__(self) -> None:
        #: (sequence number, event, its retained size)
        self.events: deque[tuple[int, Event, int]] = deque()
        self.turn_starts: deque[int] = deque()
        self.closed = False
        self.bytes = 0


class EventHistory:
    def __init__(
        self,
        limit: int = DEFAULT_HISTORY_LIMIT,
        keep_closed: int = KEEP_CLOSED,
        max_bytes: int = DEFAULT_HISTORY_BYTES,
    ) -> None:
        self._limit = limit
        self._max_bytes = max_bytes
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
        size = retained_size(event)
        history.events.append((seq, event, size))
        history.bytes += size
        self._where[event.event_id] = (thread_id, seq)
        while history.events and (
            len(history.events) > self._limit or history.bytes > self._max_bytes
        ):
            self._pop_oldest(history)
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
        return [event for s, event, _ in self._retained(thread_id) if s > seq]

    def retained(self, thread_id: str | None) -> list[Event]:
        """Everything retained (of ``thread_id``, or of every thread), oldest first."""
        return [event for _, event, _ in self._retained(thread_id)]

    def retained_bytes(self, thread_id: str | None) -> int:
        """The bytes retained (:func:`retained_size`) for ``thread_id``, or for every thread."""
        if thread_id is not None:
            history = self._threads.get(thread_id)
            return 0 if history is None else history.bytes
        return sum(h.bytes for h in self._threads.values())

    def _retained(self, thread_id: str | None) -> Iterable[tuple[int, Event, int]]:
        if thread_id is not None:
            history = self._threads.get(thread_id)
            return () if history is None else tuple(history.events)
        return heapq.merge(*(tuple(h.events) for h in self._threads.values()))

    def _pop_oldest(self, history: _ThreadHistory) -> None:
        _, old, size = history.events.popleft()
        history.bytes -= size
        self._where.pop(old.event_id, None)

    def _drop_before(self, history: _ThreadHistory, seq: int) -> None:
        while history.events and history.events[0][0] < seq:
            self._pop_oldest(history)

    def _forget(self, thread_id: str) -> None:
        history = self._threads.pop(thread_id, None)
        self._closed.pop(thread_id, None)
        if history is not None:
            for _, old, _ in history.events:
                self._where.pop(old.event_id, None)
