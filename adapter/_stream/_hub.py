"""Fan-out of canonical events to any number of consumers, with replay and a bound.

Why it exists: a host rarely has one consumer. A web backend has one per open
tab, each following one thread, each liable to fall behind or to reconnect
mid-turn. So a subscription can be filtered to one thread, can start right
after an event it already has (replayed from :mod:`adapter._stream._replay_window`),
and has a bounded queue.

Rules:
- subscribing (with its replay) and emitting are synchronous on the loop, so a
  subscriber gets every event after its starting point exactly once, in order;
- a consumer more than ``max_queue`` events behind is **closed**: its queue keeps
  what it already holds, then a ``stream.gap`` marker (``reason="overflow"``,
  ``last_event_id``: the last event it will have read), then the end. It never
  blocks the emitter or other subscribers, and never grows without bound; it
  catches up by subscribing again with ``after=gap.last_event_id``;
- ``after=`` an event that is no longer retained starts with a ``stream.gap``
  (``reason="expired"``) and then everything retained; ``replay=True`` starts with
  everything retained (a page that loads mid-turn draws the turn so far).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Literal, Self

from .._base._closing import AsyncClosing
from .._types._events import Event, StreamGap
from ._replay_window import DEFAULT_HISTORY_BYTES, DEFAULT_HISTORY_LIMIT, EventHistory

__all__ = ["DEFAULT_MAX_QUEUE", "EventHub", "EventStream"]

#: Events a subscriber may have unread before it is closed with a ``stream.gap``.
DEFAULT_MAX_QUEUE = 10_000


class EventStream(AsyncIterator[Event], AsyncClosing):
    """One consumer's view of the adapter's events.

    It sees every event emitted after it was created (or after its ``after=``
    event), of one thread or of all, and ends when the adapter closes, when
    :meth:`aclose` is called, or after a ``stream.gap`` overflow marker. Use it
    as ``async for`` directly or inside ``async with`` to unsubscribe
    deterministically.
    """

    def __init__(self, hub: EventHub, thread_id: str | None, max_queue: int) -> None:
        self._hub = hub
        self._thread_id = thread_id
        self._max_queue = max_queue
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._done = False
        self._ended = False  # nothing more will be queued
        self._last_queued: str | None = None

    @property
    def thread_id(self) -> str | None:
        """The thread this stream follows (``None``: every thread)."""
        return self._thread_id

    @property
    def backlog(self) -> int:
        """How many events are queued for this stream and not read yet (at most
        ``max_queue``: past it the stream ends with a ``stream.gap``)."""
        return self._queue.qsize()

    def _wants(self, event: Event) -> bool:
        return self._thread_id is None or event.thread_id == self._thread_id

    def _put(self, event: Event) -> None:
        """Queue one event, or, past the bound, end the stream with an overflow gap."""
        if self._ended:
            return
        if self._queue.qsize() >= self._max_queue:
            self._gap("overflow", f"the consumer fell more than {self._max_queue} events behind")
            self._end()
            self._hub.unsubscribe(self)
            return
        self._queue.put_nowait(event)
        self._last_queued = event.event_id

    def _gap(self, reason: Literal["overflow", "expired"], message: str) -> None:
        self._queue.put_nowait(
            StreamGap(
                thread_id=self._thread_id or "",
                reason=reason,
                last_event_id=self._last_queued,
                message=message,
            )
        )

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._queue.put_nowait(None)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        if self._done:
            raise StopAsyncIteration
        event = await self._queue.get()
        if event is None:
            self._done = True
            self._hub.unsubscribe(self)
            raise StopAsyncIteration
        return event

    async def aclose(self) -> None:
        """Unsubscribe and end the stream, also for a consumer that waits for its next
        event in another task (it gets ``StopAsyncIteration``); what was still queued
        is dropped."""
        self._done = True
        self._hub.unsubscribe(self)
        while not self._queue.empty():
            self._queue.get_nowait()
        self._end()


class EventHub:
    def __init__(
        self,
        history_limit: int = DEFAULT_HISTORY_LIMIT,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
    ) -> None:
        self._streams: list[EventStream] = []
        self._closed = False
        self.history = EventHistory(history_limit, max_bytes=history_bytes)
        self.emitted = 0

    @property
    def subscribers(self) -> int:
        return len(self._streams)

    def subscribe(
        self,
        thread_id: str | None = None,
        *,
        after: str | None = None,
        replay: bool = False,
        max_queue: int = DEFAULT_MAX_QUEUE,
    ) -> EventStream:
        stream = EventStream(self, thread_id, max_queue)
        missed: list[Event] = []
        if after is not None:
            found = self.history.after(thread_id, after)
            if found is None:
                stream._gap(
                    "expired",
                    f"event {after!r:.60} is not retained; replaying from the oldest retained",
                )
                missed = self.history.retained(thread_id)
            else:
                stream._last_queued = after
                missed = found
        elif replay:
            missed = self.history.retained(thread_id)
        # The replay may itself exceed the bound: the stream then ends with a gap
        # after the first ``max_queue`` events, like any slow consumer.
        for event in missed:
            stream._put(event)
            if stream._ended:
                return stream
        if self._closed:
            stream._end()
        else:
            self._streams.append(stream)
        return stream

    def unsubscribe(self, stream: EventStream) -> None:
        if stream in self._streams:
            self._streams.remove(stream)

    def emit(self, event: Event) -> None:
        self.emitted += 1
        self.history.record(event)
        for stream in tuple(self._streams):
            if stream._wants(event):
                stream._put(event)

    def close(self) -> None:
        self._closed = True
        for stream in self._streams:
            stream._end()
        self._streams.clear()
