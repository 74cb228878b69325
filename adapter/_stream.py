"""Fan-out of canonical events to any number of consumers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

from ._events import Event

__all__ = ["EventHub", "EventStream"]


class EventStream(AsyncIterator[Event]):
    """One consumer's view of the adapter's events.

    It sees every event emitted after it was created (create it before the
    calls whose events you want), and ends when the adapter closes or
    :meth:`aclose` is called. Use it as ``async for`` directly or inside
    ``async with`` to unsubscribe deterministically.
    """

    def __init__(self, hub: EventHub) -> None:
        self._hub = hub
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._done = False

    def _put(self, event: Event | None) -> None:
        self._queue.put_nowait(event)

    @property
    def backlog(self) -> int:
        return self._queue.qsize()

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
        self._done = True
        self._hub.unsubscribe(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class EventHub:
    def __init__(self) -> None:
        self._streams: list[EventStream] = []
        self._closed = False
        self.emitted = 0

    def subscribe(self) -> EventStream:
        stream = EventStream(self)
        if self._closed:
            stream._put(None)
        else:
            self._streams.append(stream)
        return stream

    def unsubscribe(self, stream: EventStream) -> None:
        if stream in self._streams:
            self._streams.remove(stream)

    def emit(self, event: Event) -> None:
        self.emitted += 1
        for stream in self._streams:
            stream._put(event)

    def close(self) -> None:
        self._closed = True
        for stream in self._streams:
            stream._put(None)
        self._streams.clear()
